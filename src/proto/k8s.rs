//! The Kubernetes API as plain values (`--k8s-protect`): where the API
//! server and the pod are (from the environment's text), the request bytes
//! for the pod's `GET` and merge `PATCH`, the three annotations drainit
//! manages and their bounds, and what an answer means. A pod read is
//! `proto::k8s_pod`'s (read by `proto::k8s_pod_read`), the record
//! `proto::k8s_record`'s. No I/O: `io::k8s` reads the files and sends.
//!
//! Bounds: a request is at most `REQUEST_LIMIT` bytes (the token at most
//! `TOKEN_LIMIT`, checked to be header-safe); an answer's body is at most
//! `API_BODY_LIMIT` (a pod can be far larger than the HTTP client's
//! `http::BODY_LIMIT`).

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use crate::proto::exchange::{Auth, Method, Request};
use crate::proto::http::{parse_date, Response};

/// `controller.kubernetes.io/pod-deletion-cost`: a ReplicaSet scale-down
/// removes pods with a lower cost first.
pub const COST_KEY: &str = "controller.kubernetes.io/pod-deletion-cost";
/// `cluster-autoscaler.kubernetes.io/safe-to-evict`: "false" keeps
/// cluster-autoscaler from removing the node.
pub const SAFE_TO_EVICT_KEY: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// `karpenter.sh/do-not-disrupt`: "true" keeps Karpenter from
/// consolidating or drifting the node away.
pub const DO_NOT_DISRUPT_KEY: &str = "karpenter.sh/do-not-disrupt";
/// drainit's own annotation: the template's values of the three keys and
/// who holds the pod busy, written in the same patch that first overwrites
/// a key and removed when every key holds its template's value again (its
/// text is `proto::k8s_record`'s).
pub const RECORD_KEY: &str = "drainit.dev/template-annotations";
/// Longest annotation value drainit keeps, in bytes of its JSON string
/// (escapes counted; the quotes not): a longer one is not recorded, and
/// drainit leaves its key alone.
pub const VALUE_LIMIT: usize = 8 * 1024;
/// Longest record read or written: three values at `VALUE_LIMIT`, the keys
/// and the busy names fit with room to spare.
pub const RECORD_LIMIT: usize = 32 * 1024;

/// Longest `terminationGracePeriodSeconds` taken (a year, the bound of
/// every duration option): a larger one is read as this.
pub const PERIOD_LIMIT_SECONDS: u64 = 365 * 24 * 3_600;
/// Largest body of an API server's answer: the `GET` and every `PATCH`
/// answer with the whole pod, and etcd holds objects of up to about
/// 1.5 MiB (sidecars, many variables, a large `last-applied` annotation).
pub const API_BODY_LIMIT: usize = 2 * 1024 * 1024;
/// Most bytes one exchange with the API server may read, head and framing
/// included.
pub const API_EXCHANGE_LIMIT: usize = API_BODY_LIMIT + 64 * 1024;
/// Largest service-account token sent (projected tokens are about 1 KiB).
pub const TOKEN_LIMIT: usize = 16 * 1024;
/// Largest request, head and body (a patch carries at most three values
/// and their record, each value at most `VALUE_LIMIT` bytes
/// escaped, the record at most `RECORD_LIMIT`, escaped once
/// more as a string).
pub const REQUEST_LIMIT: usize = TOKEN_LIMIT + 96 * 1024;
/// Longest string kept from a pod read but the annotations (a name, a uid,
/// a time, a resourceVersion).
pub const FIELD_LIMIT: usize = 256;
/// Most containers kept from a pod read (init containers included); the
/// API server allows far fewer in practice.
pub const CONTAINER_LIMIT: usize = 64;
/// The longest `Retry-After` honoured: a server cannot stop protection
/// for longer than this with one answer.
pub const RETRY_AFTER_LIMIT: Duration = Duration::from_secs(300);

/// One of the three annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    Cost,
    SafeToEvict,
    DoNotDisrupt,
}

impl Annotation {
    pub const ALL: [Annotation; 3] = [
        Annotation::Cost,
        Annotation::SafeToEvict,
        Annotation::DoNotDisrupt,
    ];

    /// The annotation's key on the pod.
    pub fn key(self) -> &'static str {
        match self {
            Annotation::Cost => COST_KEY,
            Annotation::SafeToEvict => SAFE_TO_EVICT_KEY,
            Annotation::DoNotDisrupt => DO_NOT_DISRUPT_KEY,
        }
    }

    /// Its name in `--k8s-annotations`.
    pub fn name(self) -> &'static str {
        match self {
            Annotation::Cost => "cost",
            Annotation::SafeToEvict => "safe-to-evict",
            Annotation::DoNotDisrupt => "do-not-disrupt",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// Which of the three annotations drainit manages (`--k8s-annotations`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Managed(u8);

impl Managed {
    pub const ALL: Managed = Managed(0b111);
    pub const NONE: Managed = Managed(0);

    /// This set and `a`.
    pub fn with(self, a: Annotation) -> Managed {
        Managed(self.0 | a.bit())
    }

    pub fn has(self, a: Annotation) -> bool {
        self.0 & a.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Annotation> {
        Annotation::ALL.into_iter().filter(move |a| self.has(*a))
    }

    /// `cost,safe-to-evict,do-not-disrupt` (any non-empty subset, any
    /// order, `all` for the three).
    pub fn parse(list: &str) -> Result<Managed, String> {
        if list.trim() == "all" {
            return Ok(Managed::ALL);
        }
        let mut bits = 0;
        for name in list.split(',').map(str::trim) {
            let Some(a) = Annotation::ALL.into_iter().find(|a| a.name() == name) else {
                let name = crate::util::text::echo(name);
                return Err(format!(
                    "unknown annotation {name:?} (expected cost, safe-to-evict, do-not-disrupt or all)"
                ));
            };
            bits |= a.bit();
        }
        Ok(Managed(bits))
    }
}

/// The `Accept` of a `PATCH`: the answer as `PartialObjectMetadata` (the
/// pod's metadata only, as client-go's metadata client asks), so a large
/// pod is not sent back for each change; plain JSON from a server that
/// cannot.
pub const PATCH_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// Default `--k8s-cost`: above the default 0 of every other pod.
pub const DEFAULT_COST: i32 = 1000;

/// The merge patch that marks the pod busy (the managed keys set: the
/// cost as a decimal string, "false", "true") or idle (each set to null,
/// which deletes it), without drainit's record: the plain form, for a
/// pod whose template sets none of the keys (the protection back-end
/// writes `annotations_patch`, which keeps the template's values).
pub fn patch_body(managed: Managed, busy: bool, cost: i32) -> Vec<u8> {
    let mut out = String::from(r#"{"metadata":{"annotations":{"#);
    for (i, a) in managed.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let value = match (busy, a) {
            (false, _) => "null".to_string(),
            (true, Annotation::Cost) => format!("\"{cost}\""),
            (true, Annotation::SafeToEvict) => "\"false\"".to_string(),
            (true, Annotation::DoNotDisrupt) => "\"true\"".to_string(),
        };
        out.push_str(&format!("\"{}\":{value}", a.key()));
    }
    out.push_str("}}}");
    out.into_bytes()
}

/// The values of the three keys, in `Annotation::ALL` order (None: not
/// set).
pub type Values = [Option<String>; 3];

/// The API server's address from `KUBERNETES_SERVICE_HOST` and
/// `KUBERNETES_SERVICE_PORT`: an IP literal (IPv6 without brackets, as the
/// kubelet writes it) and a port. No name: the certificate is checked by
/// IP SAN.
pub fn api_address(host: Option<&str>, port: Option<&str>) -> Result<(IpAddr, u16), String> {
    let host = host
        .filter(|h| !h.is_empty())
        .ok_or("KUBERNETES_SERVICE_HOST is not set (not running in a Kubernetes pod?)")?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let ip = bare.parse::<IpAddr>().map_err(|_| {
        let host = crate::util::text::echo(host);
        format!("KUBERNETES_SERVICE_HOST {host:?} is not an IP address")
    })?;
    let port = port.filter(|p| !p.is_empty()).unwrap_or("443");
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok((ip, p)),
        _ => {
            let port = crate::util::text::echo(port);
            Err(format!("KUBERNETES_SERVICE_PORT {port:?} is not a port"))
        }
    }
}

/// `host:port` for the Host header (`[v6]:port`).
pub fn authority(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

/// A DNS-1123 label (a namespace): 1 to 63 of `a-z0-9-`, alphanumeric at
/// both ends.
pub fn is_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain (a pod name): up to 253 characters, labels joined
/// by dots.
pub fn is_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_label)
}

/// The pod's name: `POD_NAME` (the Downward API), else `HOSTNAME` (which
/// is the pod's name unless the pod sets `spec.hostname`).
pub fn pod_name(pod_name: Option<&str>, hostname: Option<&str>) -> Result<String, String> {
    let (name, from) = match (pod_name.filter(|n| !n.is_empty()), hostname) {
        (Some(n), _) => (n, "POD_NAME"),
        (None, Some(h)) if !h.is_empty() => (h, "HOSTNAME"),
        _ => return Err("neither POD_NAME nor HOSTNAME is set".into()),
    };
    if !is_subdomain(name) {
        let name = crate::util::text::echo(name);
        return Err(format!("{from} {name:?} is not a pod name"));
    }
    Ok(name.to_string())
}

/// The namespace file's text, checked.
pub fn namespace(text: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(text);
    let ns = text.trim();
    if !is_label(ns) {
        return Err(format!(
            "the namespace file holds {:?}, not a namespace",
            crate::util::text::escape(ns, 80)
        ));
    }
    Ok(ns.to_string())
}

/// `/api/v1/namespaces/NS/pods/NAME`.
pub fn pod_path(namespace: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{pod}")
}

/// The token file's text: surrounding whitespace trimmed, then visible
/// ASCII only (it goes into a header), at most `TOKEN_LIMIT`.
pub fn token(text: &[u8]) -> Result<&str, String> {
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    let t = &text[start..end.max(start)];
    if t.is_empty() {
        return Err("the token file is empty".into());
    }
    if t.len() > TOKEN_LIMIT {
        return Err(format!(
            "the token file is larger than {} KiB",
            TOKEN_LIMIT / 1024
        ));
    }
    if !t.iter().all(u8::is_ascii_graphic) {
        return Err("the token file holds characters a token cannot have".into());
    }
    Ok(std::str::from_utf8(t).unwrap_or_default())
}

/// One whole request (head and body), at most `REQUEST_LIMIT` bytes:
/// `req`'s method, headers, query and body to the pod at `path`
/// (`pod_path` of checked names) on `authority`, with `token` (passed
/// through `token`) when `req` authenticates. A `PATCH` is a JSON merge
/// patch.
pub fn request(
    req: &Request,
    authority: &str,
    path: &str,
    token: Option<&str>,
) -> Result<Vec<u8>, String> {
    let mut out = format!(
        "{} {} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: drainit/{}\r\n",
        req.method,
        req.path_with_query(path),
        env!("CARGO_PKG_VERSION")
    );
    if let (Auth::ServiceAccount, Some(token)) = (req.auth, token) {
        out.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if !req
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("accept"))
    {
        out.push_str("Accept: application/json\r\n");
    }
    out.push_str(&req.header_lines());
    out.push_str("Connection: close\r\n");
    let body = req.body.as_deref().unwrap_or_default();
    if req.method == Method::Patch {
        out.push_str(&format!(
            "Content-Type: application/merge-patch+json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    } else if req.body.is_some() {
        out.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    if out.len() > REQUEST_LIMIT {
        return Err(format!(
            "the request would be larger than {} KiB",
            REQUEST_LIMIT / 1024
        ));
    }
    Ok(out)
}

/// What an answer means for the protection back-end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx: the pod was read or patched.
    Applied,
    /// 401: the token was refused; read it again and retry.
    Unauthenticated,
    /// 403: the service account may not get or patch pods (RBAC), or an
    /// admission policy refused; the API's message.
    Forbidden(String),
    /// 404: no such pod (a wrong `POD_NAME`?).
    NoSuchPod,
    /// 409, 429, 5xx: try again later, not before `after` when given
    /// (the `Retry-After` of a 429 or a 503, at most `RETRY_AFTER_LIMIT`).
    Retry { after: Option<Duration> },
    /// 422 and other 4xx: the API refused the change; its message.
    Refused(u16, String),
    /// Anything else (3xx, 1xx, nonsense).
    Unexpected(u16),
}

/// Classifies an answer (a 429 waits its `Retry-After`, 1 s without
/// one; a 503 its `Retry-After` when it has one, as client-go does).
pub fn verdict(response: &Response) -> Verdict {
    match response.status {
        200..=299 => Verdict::Applied,
        401 => Verdict::Unauthenticated,
        403 => Verdict::Forbidden(status_message(&response.body)),
        404 => Verdict::NoSuchPod,
        503 => Verdict::Retry {
            after: response.retry_after,
        },
        409 | 500..=599 => Verdict::Retry { after: None },
        429 => Verdict::Retry {
            after: Some(response.retry_after.unwrap_or(Duration::from_secs(1))),
        },
        s @ 400..=499 => Verdict::Refused(s, status_message(&response.body)),
        s => Verdict::Unexpected(s),
    }
}

/// The `message` of a Kubernetes `Status` body, escaped and cut short;
/// empty when there is none.
pub fn status_message(body: &[u8]) -> String {
    let message = crate::proto::json::parse(body)
        .ok()
        .and_then(|v| v.get("message")?.as_str().map(str::to_string))
        .unwrap_or_default();
    crate::util::text::escape(&message, 300)
}

/// The headers of the final head in `raw` (the first bytes of the
/// answer: interim 1xx heads are skipped) that the core reads: its
/// `Retry-After` in delta-seconds, at most `RETRY_AFTER_LIMIT` (a date or
/// nonsense is None), and its `Date` (`http::parse_date`).
pub fn head_fields(mut raw: &[u8]) -> (Option<Duration>, Option<SystemTime>) {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut head = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(len)) = head.parse(raw) else {
            return (None, None);
        };
        if matches!(head.code, Some(100..=199)) {
            raw = &raw[len..];
            continue;
        }
        let value = |name: &str| {
            let h = head
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))?;
            std::str::from_utf8(h.value).ok().map(str::trim)
        };
        let retry_after = value("retry-after")
            .and_then(|t| t.parse::<u64>().ok())
            .map(|secs| Duration::from_secs(secs).min(RETRY_AFTER_LIMIT));
        return (retry_after, value("date").and_then(parse_date));
    }
}

/// The wait before retry number `failures` (1, 2, …) after a failure
/// without `Retry-After`: 1 s doubling to at most 60 s.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(6);
    Duration::from_secs((1u64 << exp).min(60))
}

/// The default `--grace` from the pod's `terminationGracePeriodSeconds`:
/// the period less a margin of 10 % or 2 s, whichever is larger, and at
/// least 1 s, so that drainit's own SIGKILL, the exit report and its last
/// lines come before the kubelet's SIGKILL.
/// The period is taken as at most `PERIOD_LIMIT_SECONDS`, the longest
/// duration drainit accepts anywhere.
pub fn pod_grace(period_seconds: u64) -> Duration {
    let period = Duration::from_secs(period_seconds.min(PERIOD_LIMIT_SECONDS));
    let margin = (period / 10).max(Duration::from_secs(2));
    period.saturating_sub(margin).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::exchange::Endpoint;
    use crate::proto::k8s_pod::*;
    use crate::proto::k8s_pod_read::read_pod;

    fn json(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn busy_and_idle_patches() {
        let busy = json(&patch_body(Managed::ALL, true, 1000));
        assert_eq!(
            busy,
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: "1000", SAFE_TO_EVICT_KEY: "false", DO_NOT_DISRUPT_KEY: "true"}}})
        );
        let idle = json(&patch_body(Managed::ALL, false, 1000));
        assert_eq!(
            idle,
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: null, SAFE_TO_EVICT_KEY: null, DO_NOT_DISRUPT_KEY: null}}})
        );
        let only = Managed::parse("do-not-disrupt, cost").unwrap();
        let busy = json(&patch_body(only, true, i32::MIN));
        assert_eq!(
            busy,
            serde_json::json!({"metadata": {"annotations": {
                COST_KEY: "-2147483648", DO_NOT_DISRUPT_KEY: "true"}}})
        );
    }

    #[test]
    fn the_managed_list() {
        assert_eq!(Managed::parse("all").unwrap(), Managed::ALL);
        assert_eq!(
            Managed::parse("cost,safe-to-evict,do-not-disrupt").unwrap(),
            Managed::ALL
        );
        let one = Managed::parse("safe-to-evict").unwrap();
        assert_eq!(one.iter().collect::<Vec<_>>(), [Annotation::SafeToEvict]);
        for bad in ["", "cost,", "Cost", "evict", "cost;safe-to-evict"] {
            assert!(Managed::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_api_server_address() {
        let v4 = api_address(Some("10.96.0.1"), Some("443")).unwrap();
        assert_eq!(v4, ("10.96.0.1".parse().unwrap(), 443));
        let v6 = api_address(Some("fd00:10:96::1"), Some("6443")).unwrap();
        assert_eq!(authority(v6.0, v6.1), "[fd00:10:96::1]:6443");
        assert_eq!(authority(v4.0, v4.1), "10.96.0.1:443");
        assert_eq!(api_address(Some("[::1]"), None).unwrap().1, 443);
        assert!(api_address(None, Some("443")).is_err());
        assert!(api_address(Some("kubernetes.default.svc"), Some("443")).is_err());
        for port in ["0", "65536", "https", "-1"] {
            assert!(api_address(Some("10.0.0.1"), Some(port)).is_err(), "{port}");
        }
    }

    #[test]
    fn pod_names_and_namespaces() {
        assert_eq!(
            pod_name(Some("web-7d9f-x2"), Some("h")).unwrap(),
            "web-7d9f-x2"
        );
        assert_eq!(pod_name(None, Some("web-1")).unwrap(), "web-1");
        assert_eq!(pod_name(Some(""), Some("web-1")).unwrap(), "web-1");
        assert!(pod_name(None, None).is_err());
        for bad in ["../x", "a/b", "A", "-a", "a b", "a%2f", &"a".repeat(254)] {
            assert!(pod_name(Some(bad), None).is_err(), "{bad}");
        }
        assert_eq!(namespace(b"default\n").unwrap(), "default");
        for bad in [&b""[..], b"a/b", b"Prod", b"x.y", &[b'a'; 64]] {
            assert!(namespace(bad).is_err());
        }
        assert_eq!(pod_path("ns", "p"), "/api/v1/namespaces/ns/pods/p");
    }

    #[test]
    fn tokens_are_header_safe_and_bounded() {
        assert_eq!(token(b"  abc.def-ghi_\n").unwrap(), "abc.def-ghi_");
        assert!(token(b"\n").is_err());
        assert!(token(b"abc\r\nX-Evil: 1").is_err());
        assert!(token(b"ab cd").is_err());
        assert!(token(&vec![b'a'; TOKEN_LIMIT + 1]).is_err());
        assert!(token(&vec![b'a'; TOKEN_LIMIT]).is_ok());
    }

    #[test]
    fn requests_are_whole_and_bounded() {
        let body = patch_body(Managed::ALL, true, 5);
        let patch = Request::new(Endpoint::K8sPod, Method::Patch)
            .with_auth(Auth::ServiceAccount)
            .with_body(Some(body.clone()));
        let r = request(&patch, "10.0.0.1:443", "/p", Some("tok")).unwrap();
        let text = String::from_utf8(r).unwrap();
        assert!(text.starts_with("PATCH /p HTTP/1.1\r\nHost: 10.0.0.1:443\r\n"));
        assert!(text.contains("\r\nAuthorization: Bearer tok\r\n"));
        assert!(text.contains("\r\nContent-Type: application/merge-patch+json\r\n"));
        assert!(text.ends_with(&format!(
            "Content-Length: {}\r\n\r\n{}",
            body.len(),
            String::from_utf8(body).unwrap()
        )));
        let mut get = Request::new(Endpoint::K8sPod, Method::Get).with_auth(Auth::ServiceAccount);
        let text = request(&get, "h", "/p", Some("tok")).unwrap();
        assert!(text.ends_with(b"\r\nAccept: application/json\r\nConnection: close\r\n\r\n"));
        let huge = "t".repeat(REQUEST_LIMIT);
        assert!(request(&get, "h", "/p", Some(&huge)).is_err());
        // The request's own query and headers; its Accept replaces the default.
        get.query = vec![("resourceVersion", "0".into())];
        get.headers = vec![("Accept", "application/json;as=Table".into())];
        let text = String::from_utf8(request(&get, "h", "/p", Some("tok")).unwrap()).unwrap();
        assert!(
            text.starts_with("GET /p?resourceVersion=0 HTTP/1.1\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\nAccept: application/json;as=Table\r\n"),
            "{text}"
        );
        assert!(!text.contains("Accept: application/json\r\n"), "{text}");
        // No token without the service account's auth.
        let plain = Request::new(Endpoint::K8sPod, Method::Get);
        let text = request(&plain, "h", "/p", Some("tok")).unwrap();
        assert!(!String::from_utf8(text).unwrap().contains("Authorization"));
    }

    #[test]
    fn a_pod_read_keeps_only_what_it_needs() {
        let body = br#"{"kind":"Pod","apiVersion":"v1",
          "metadata":{"name":"w","resourceVersion":"42","managedFields":[{"a":{"b":[1,2,{}]}}],
            "annotations":{"other":"x","karpenter.sh/do-not-disrupt":"true",
              "controller.kubernetes.io/pod-deletion-cost":"1000"}},
          "spec":{"containers":[{"name":"c"}],"terminationGracePeriodSeconds":45},
          "status":{"phase":"Running"}}"#;
        let pod = read_pod(body).unwrap();
        assert_eq!(
            pod.annotations,
            [Some("1000".into()), None, Some("true".into())]
        );
        assert_eq!(pod.resource_version.as_deref(), Some("42"));
        assert_eq!(pod.grace_seconds, Some(45));
        assert!(pod.holds(Managed::ALL));
        assert!(!pod.holds(Managed::parse("safe-to-evict").unwrap()));
        // Escaped keys are keys all the same.
        let escaped = br#"{"metadata":{"annotations":{"karpenter.sh\/do-not-disrupt":"true"}}}"#;
        assert!(read_pod(escaped).unwrap().annotations[2].is_some());
        // No annotations at all, or null: nothing held.
        let bare = read_pod(br#"{"metadata":{"annotations":null},"spec":{}}"#).unwrap();
        assert_eq!(bare, Pod::default());
        for bad in [
            &b""[..],
            b"null",
            b"[]",
            b"{\"metadata\":",
            b"{} x",
            b"{\"metadata\":[1]}",
        ] {
            assert!(read_pod(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_large_pod_is_read_without_a_value_cap() {
        // 10,000 values (over json::MAX_VALUES): skipped, not built.
        let env: Vec<String> = (0..5000).map(|i| format!(r#"{{"name":"V{i}"}}"#)).collect();
        let body = format!(
            r#"{{"spec":{{"env":[{}],"terminationGracePeriodSeconds":30}}}}"#,
            env.join(",")
        );
        assert_eq!(read_pod(body.as_bytes()).unwrap().grace_seconds, Some(30));
        // Not a whole number of seconds: the rest of the pod is still read.
        for odd in [r#""30""#, "-1", "2.5", "true", r#"{"a":[1]}"#, "[30]"] {
            let body = format!(
                r#"{{"spec":{{"terminationGracePeriodSeconds":{odd}}},"metadata":{{"resourceVersion":"9"}}}}"#
            );
            let pod = read_pod(body.as_bytes()).unwrap();
            assert_eq!(pod.grace_seconds, None, "{odd}");
            assert!(pod.grace_unreadable, "{odd}");
            assert_eq!(pod.resource_version.as_deref(), Some("9"), "{odd}");
        }
        let pod = read_pod(br#"{"spec":{"terminationGracePeriodSeconds":null}}"#).unwrap();
        assert!(!pod.grace_unreadable && pod.grace_seconds.is_none());
    }

    #[test]
    fn mangled_pods_never_panic() {
        let pod = br#"{"metadata":{"resourceVersion":"7","annotations":{"karpenter.sh/do-not-disrupt":"true","a":"b"}},"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"c"}]}}"#;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let mut body = pod.to_vec();
            for _ in 0..(next() % 4 + 1) {
                let at = (next() % body.len() as u64) as usize;
                match next() % 3 {
                    0 => body[at] = b"{}[]\",:0\\n"[(next() % 10) as usize],
                    1 => body.truncate(at),
                    _ => body.insert(at, next() as u8),
                }
                if body.is_empty() {
                    body.push(b'{');
                }
            }
            if let Ok(p) = read_pod(&body) {
                assert!(p
                    .annotations
                    .iter()
                    .flatten()
                    .all(|v| v.len() <= (VALUE_LIMIT + 1) * 4));
            }
            let _ = head_fields(&body);
            let _ = status_message(&body);
        }
    }

    fn answer(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: Some("application/json".into()),
            body: body.as_bytes().to_vec(),
            ..Response::default()
        }
    }

    #[test]
    fn answers_are_classified() {
        assert_eq!(verdict(&answer(200, "{}")), Verdict::Applied);
        assert_eq!(verdict(&answer(401, "")), Verdict::Unauthenticated);
        let forbidden = answer(
            403,
            r#"{"kind":"Status","message":"pods \"w\" is forbidden"}"#,
        );
        assert_eq!(
            verdict(&forbidden),
            Verdict::Forbidden("pods \"w\" is forbidden".into())
        );
        assert_eq!(verdict(&answer(404, "")), Verdict::NoSuchPod);
        for s in [409, 500, 503] {
            assert_eq!(verdict(&answer(s, "")), Verdict::Retry { after: None });
        }
        let later = Some(Duration::from_secs(7));
        // A 503's Retry-After is honoured as a 429's; a 500's is not.
        let mut unavailable = answer(503, "");
        unavailable.retry_after = later;
        assert_eq!(verdict(&unavailable), Verdict::Retry { after: later });
        let mut error = answer(500, "");
        error.retry_after = later;
        assert_eq!(verdict(&error), Verdict::Retry { after: None });
        let mut busy = answer(429, "");
        busy.retry_after = later;
        assert_eq!(verdict(&busy), Verdict::Retry { after: later });
        assert_eq!(
            verdict(&answer(429, "")),
            Verdict::Retry {
                after: Some(Duration::from_secs(1))
            }
        );
        let invalid = answer(422, r#"{"message":"metadata.annotations: Invalid value"}"#);
        assert_eq!(
            verdict(&invalid),
            Verdict::Refused(422, "metadata.annotations: Invalid value".into())
        );
        assert_eq!(verdict(&answer(302, "")), Verdict::Unexpected(302));
    }

    #[test]
    fn retry_after_and_date_from_the_final_head() {
        let retry_after = |head: &[u8]| head_fields(head).0;
        let head = b"HTTP/1.1 100 Continue\r\nDate: Thu, 01 Jan 1970 00:00:09 GMT\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nDate: Thu, 01 Jan 1970 00:00:05 GMT\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            head_fields(head),
            (
                Some(Duration::from_secs(7)),
                Some(SystemTime::UNIX_EPOCH + Duration::from_secs(5))
            )
        );
        let huge = b"HTTP/1.1 429 x\r\nretry-after: 99999999\r\n\r\n";
        assert_eq!(retry_after(huge), Some(RETRY_AFTER_LIMIT));
        let date = b"HTTP/1.1 429 x\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\nDate: yesterday\r\n\r\n";
        assert_eq!(head_fields(date), (None, None));
        assert_eq!(retry_after(b"HTTP/1.1 429 x\r\n"), None);
        assert_eq!(retry_after(b"HTTP/1.1 200 OK\r\n\r\n"), None);
    }

    #[test]
    fn the_grace_from_the_pod() {
        let s = Duration::from_secs;
        assert_eq!(pod_grace(10), s(8));
        assert_eq!(pod_grace(30), s(27));
        assert_eq!(pod_grace(60), s(54));
        assert_eq!(pod_grace(300), s(270));
        assert_eq!(pod_grace(2), s(1), "at least 1 s");
        assert_eq!(pod_grace(0), s(1));
        let year = s(PERIOD_LIMIT_SECONDS);
        assert_eq!(pod_grace(PERIOD_LIMIT_SECONDS), year - year / 10);
        assert_eq!(pod_grace(PERIOD_LIMIT_SECONDS + 1), year - year / 10);
        assert_eq!(pod_grace(u64::MAX), year - year / 10, "clamped to a year");
    }

    #[test]
    fn a_deletion_and_its_reason_are_read() {
        let body = br#"{"metadata":{"uid":"u-1","deletionTimestamp":"2026-11-28T20:42:34Z",
            "deletionGracePeriodSeconds":10,"resourceVersion":"5"},
          "spec":{"terminationGracePeriodSeconds":30},
          "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},
            {"type":"DisruptionTarget","status":"True","reason":"TerminationByKubelet","message":"x"}]}}"#;
        let pod = read_pod(body).unwrap();
        assert_eq!(pod.uid.as_deref(), Some("u-1"));
        assert_eq!(pod.deletion, parse_time("2026-11-28T20:42:34Z"));
        assert!(pod.deletion.is_some());
        assert_eq!(pod.deletion_grace_seconds, Some(10));
        assert_eq!(pod.disruption.as_deref(), Some("TerminationByKubelet"));
        assert_eq!(pod.grace_seconds, Some(30));
        // A condition that does not hold says nothing; odd shapes are skipped.
        let off = br#"{"status":{"conditions":[{"type":"DisruptionTarget","status":"False","reason":"R"}]}}"#;
        assert_eq!(read_pod(off).unwrap().disruption, None);
        for odd in [r#"null"#, r#"{}"#, r#"[1,"a",null,[]]"#, r#""x""#] {
            let body = format!(r#"{{"status":{{"conditions":{odd}}}}}"#);
            assert_eq!(read_pod(body.as_bytes()).unwrap().disruption, None, "{odd}");
        }
    }

    #[test]
    fn rfc_3339_times() {
        let at = |secs: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), at(0));
        assert_eq!(parse_time("1994-11-06T08:49:37Z"), at(784_111_777));
        assert_eq!(parse_time("1994-11-06T08:49:37.123456Z"), at(784_111_777));
        assert_eq!(parse_time("1994-11-06T10:49:37+02:00"), at(784_111_777));
        assert_eq!(parse_time("1994-11-06T06:49:37-02:00"), at(784_111_777));
        for bad in [
            "",
            "1994-11-06",
            "1994-11-06T08:49:37",
            "1994-13-06T08:49:37Z",
            "1994-11-06T24:49:37Z",
            "1994-11-06T08:49:37.Z",
            "1994-11-06T08:49:37+2:00",
            "1994-11-06 08:49:37Z",
            "1969-12-31T23:59:59Z",
            "0000-01-01T00:00:00Z",
            "0000-02-29T00:00:00Z",
            "+994-11-06T08:49:37Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn containers_probes_and_pre_stop_hooks_are_read() {
        let body = br#"{"spec":{"terminationGracePeriodSeconds":60,
          "initContainers":[{"name":"setup","command":["/drainit","x"]},
            {"name":"proxy","restartPolicy":"Always","lifecycle":{"preStop":{"exec":{"command":["sleep","3"]}}}}],
          "containers":[{"name":"app","image":"a","env":[{"name":"X","value":"y"}],
            "command":["/usr/local/bin/drainit","--k8s-protect","--"],"args":["/app"],
            "livenessProbe":{"httpGet":{"path":"/h"},"terminationGracePeriodSeconds":20},
            "startupProbe":{"terminationGracePeriodSeconds":null},
            "lifecycle":{"preStop":{"sleep":{"seconds":5}}}},
            {"name":"log","args":["drainit-like"]}]}}"#;
        let pod = read_pod(body).unwrap();
        let names: Vec<&str> = pod.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["setup", "proxy", "app", "log"], "as written");
        let named = |n: &str| pod.containers.iter().find(|c| c.name == n).unwrap();
        let app = named("app");
        assert!(!app.init);
        assert_eq!(app.probe_grace, [Some(20), None]);
        assert_eq!(app.pre_stop, PreStop::Sleep(5));
        assert!(named("setup").init && !named("setup").restartable);
        assert!(named("proxy").restartable);
        assert_eq!(named("proxy").pre_stop, PreStop::Other);
        // The grace: min(60, 20) = 20, less 5 s of sleep, less 2 s.
        assert_eq!(spec_grace(60, Some(app)), Duration::from_secs(13));
        assert_eq!(spec_grace(60, None), Duration::from_secs(54));
        // Three run (the restartable init container counted): no name
        // (whatever the commands say), the smallest; the one named.
        assert_eq!(
            choose(&pod.containers, None, 60),
            Chosen::Smallest(Some(app))
        );
        let proxy = named("proxy");
        assert_eq!(
            choose(&pod.containers, Some("proxy"), 60),
            Chosen::One(proxy)
        );
        assert_eq!(
            choose(&pod.containers, Some("setup"), 60),
            Chosen::Smallest(Some(app)),
            "an init container that ran to completion is not drainit's"
        );
        let only = [named("log").clone()];
        assert_eq!(choose(&only, None, 60), Chosen::One(&only[0]));
        assert_eq!(choose(&[], None, 60), Chosen::Smallest(None));
        // A short sleep's grace is at least 1 s.
        let long_sleep = Container {
            pre_stop: PreStop::Sleep(100),
            ..Container::default()
        };
        assert_eq!(spec_grace(30, Some(&long_sleep)), Duration::from_secs(1));
        // Never more than CONTAINER_LIMIT kept.
        let many: Vec<String> = (0..100).map(|i| format!(r#"{{"name":"c{i}"}}"#)).collect();
        let body = format!(r#"{{"spec":{{"containers":[{}]}}}}"#, many.join(","));
        assert_eq!(
            read_pod(body.as_bytes()).unwrap().containers.len(),
            CONTAINER_LIMIT
        );
    }

    #[test]
    fn backoff_doubles_to_a_minute() {
        let s = Duration::from_secs;
        assert_eq!(
            (1..=9).map(backoff).collect::<Vec<_>>(),
            [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60), s(60)]
        );
        assert_eq!(backoff(0), s(1));
    }
}
