//! The in-cluster Kubernetes API client (`--k8s-protect`): where the API
//! server and the pod are (the service variables, `POD_NAME` or
//! `HOSTNAME`, the service-account namespace), and one `GET` or merge
//! `PATCH` of drainit's own pod over `io::tls`, with the token and the CA
//! read again from the service-account directory before every request
//! (the kubelet rotates the projected token about hourly). The API
//! server's host may be a DNS name: it is looked up by each request, on
//! the request thread and within the request's deadline, so a lookup that
//! fails is a failed request like any other (retried with the back-end's
//! backoff), and nothing on the way to the child's start waits for it.
//!
//! There is no other way in: no kubeconfig, no proxy variables, no system
//! roots, no insecure mode, and the directory is always the standard one
//! (tests mount theirs there, in a mount namespace of their own). Files
//! are read up to a bound each. Nothing here decides anything: what an
//! answer means is `proto::k8s::verdict`.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use crate::io::{http, tls};
use crate::proto::exchange::{Auth, Endpoint, Method, Request};
use crate::proto::http::{Failure, Kind, Response};
use crate::proto::k8s as api;
use crate::proto::k8s_host::{self as host, Host};
use crate::proto::k8s_mounts::{mounted, Mounted, MOUNTINFO_LIMIT};

/// Where the service account's token, CA and namespace are mounted.
pub const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// How long one request may take, connect to last byte.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest namespace file read.
const NAMESPACE_LIMIT: usize = 256;

/// drainit's pod and the API server that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// An address, or a name looked up by each request.
    pub host: Host,
    pub port: u16,
    pub namespace: String,
    pub pod: String,
}

/// Reads at most `limit` bytes of `path`; more is an error.
fn read_bounded(path: &Path, limit: usize) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| {
        // No service-account directory at all: the pod mounts no token.
        let hint = match e.kind() == std::io::ErrorKind::NotFound && !Path::new(SA_DIR).exists() {
            true => " (the pod mounts no service-account token: remove `automountServiceAccountToken: false` from the pod or its service account, or mount a projected token there)",
            false => "",
        };
        format!("cannot read {}: {e}{hint}", path.display())
    })?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() > limit {
        return Err(format!(
            "{} is larger than {} KiB",
            path.display(),
            limit.div_ceil(1024)
        ));
    }
    Ok(bytes)
}

/// The containers the kubelet's mounts in drainit's own mount namespace
/// name (`proto::k8s_mounts`); none when mountinfo cannot be read. A
/// longer mountinfo is read to its bound.
pub fn read_mounts() -> Vec<Mounted> {
    let mut bytes = Vec::new();
    let read = std::fs::File::open("/proc/self/mountinfo")
        .and_then(|f| f.take(MOUNTINFO_LIMIT as u64).read_to_end(&mut bytes));
    match read {
        Ok(_) => mounted(&bytes),
        Err(_) => Vec::new(),
    }
}

/// The service account's namespace, from its file.
pub fn read_namespace() -> Result<String, String> {
    api::namespace(&read_bounded(
        &Path::new(SA_DIR).join("namespace"),
        NAMESPACE_LIMIT,
    )?)
}

impl Place {
    /// The place from the environment and the service-account namespace
    /// file: a clear message when drainit is not in a pod.
    pub fn from_environment() -> Result<Place, String> {
        let var = |name: &str| std::env::var(name).ok();
        let (host, port) = host::api_address(
            var("KUBERNETES_SERVICE_HOST").as_deref(),
            var("KUBERNETES_SERVICE_PORT").as_deref(),
        )?;
        let pod = api::pod_name(var("POD_NAME").as_deref(), var("HOSTNAME").as_deref())?;
        let namespace = read_namespace()?;
        Ok(Place {
            host,
            port,
            namespace,
            pod,
        })
    }
}

/// `method` of the pod with the service account's token, and `body`.
pub fn pod_request(method: Method, body: Option<&[u8]>) -> Request {
    Request::new(Endpoint::K8sPod, method)
        .with_auth(Auth::ServiceAccount)
        .with_body(body.map(<[u8]>::to_vec))
}

/// `GET` of the pod.
pub fn get_pod(place: &Place, timeout: Duration) -> Result<Response, Failure> {
    send(place, &pod_request(Method::Get, None), timeout)
}

/// Merge `PATCH` of the pod with `body` (`proto::k8s::patch_body`).
pub fn patch_pod(place: &Place, body: &[u8], timeout: Duration) -> Result<Response, Failure> {
    send(place, &pod_request(Method::Patch, Some(body)), timeout)
}

/// What a request thread runs: `request` to the pod, its result handed to
/// `report` exactly once, a panic inside it (a drainit bug) contained as
/// every request's is (`http::contain`): an `internal` failure, so PID 1
/// and the stop timeline go on (the release profile unwinds for this).
pub fn run_and_report(
    place: &Place,
    request: &Request,
    timeout: Duration,
    report: impl FnOnce(Result<Response, Failure>),
) {
    http::report_once(report, || {
        http::contain(|| {
            crate::util::fault::point("k8s_worker");
            send(place, request, timeout)
        })
    });
}

/// One request, the token (when it authenticates) and the CA read again
/// first; the answer with the `Retry-After` and `Date` of its head.
fn send(place: &Place, req: &Request, timeout: Duration) -> Result<Response, Failure> {
    let sa = Path::new(SA_DIR);
    let local = |e: String| Failure::new(Kind::Io, &e);
    let token_text = match req.auth {
        // Room for surrounding whitespace around the largest token.
        Auth::ServiceAccount => {
            Some(read_bounded(&sa.join("token"), api::TOKEN_LIMIT + 1024).map_err(local)?)
        }
        Auth::None => None,
    };
    let token = token_text
        .as_deref()
        .map(api::token)
        .transpose()
        .map_err(local)?;
    let ca = read_bounded(&sa.join("ca.crt"), tls::CA_LIMIT).map_err(local)?;
    let request = api::request(
        req,
        &place.host.authority(place.port),
        &api::pod_path(&place.namespace, &place.pod),
        token,
    )
    .map_err(|e| Failure::new(Kind::Internal, &e))?;
    let (mut response, head) = tls::send(&tls::Exchange {
        host: &place.host,
        port: place.port,
        ca_pem: &ca,
        request: &request,
        timeout,
    })?;
    (response.retry_after, response.date) = api::head_fields(&head);
    Ok(response)
}
