//! One request as the core asks for it, typed: the endpoint it goes to
//! (`Endpoint`: a plain `http://` URL, drainit's own Kubernetes pod, room
//! for a unix socket), its method, the headers and query it adds, its
//! authentication and its body. The shell matches on the endpoint to pick
//! the client (`shell::executor`); nothing is parsed back from a string.
//! The answer is `proto::http::Response`, which keeps the headers the core
//! reads (`Retry-After`, `Date`) as fields.

use std::fmt;

/// An HTTP method. The ones drainit sends itself are variants; `--stop-method`
/// may name any other (letters only, upper case), kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    /// For the Kubernetes pod, a JSON merge patch
    /// (`application/merge-patch+json`).
    Patch,
    Delete,
    /// Any other method a user named (`--stop-method`), upper case.
    Other(String),
}

impl Method {
    /// The method as sent on the request line.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Other(name) => name,
        }
    }

    /// A request of this method always carries a length, if only 0.
    pub fn sends_body(&self) -> bool {
        matches!(self, Method::Post | Method::Put | Method::Patch)
    }
}

impl From<&str> for Method {
    /// The method named by `name` (upper case; anything else is `Other`).
    fn from(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            other => Method::Other(other.to_string()),
        }
    }
}

impl From<String> for Method {
    fn from(name: String) -> Method {
        Method::from(name.as_str())
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a request goes; the shell picks its client by this alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A plain `http://` URL (drain sources, hooks, the ECS agent),
    /// checked at start (`proto::http::parse_url`).
    HttpUrl(String),
    /// drainit's own pod on the Kubernetes API server (`--k8s-protect`),
    /// over TLS, where the configuration says it is.
    K8sPod,
    // A unix socket (`Unix(PathBuf)`) goes here when a platform needs one.
}

/// How a request authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    None,
    /// The pod's service-account token, read again by the shell for each
    /// request (the kubelet rotates it).
    ServiceAccount,
}

/// One request the core asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub endpoint: Endpoint,
    pub method: Method,
    /// Header lines added to those the client always sends; names and
    /// values are drainit's own, never an outsider's.
    pub headers: Vec<(&'static str, String)>,
    /// Query parameters added to the endpoint's path, in order, already
    /// safe in a URL.
    pub query: Vec<(&'static str, String)>,
    pub auth: Auth,
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// `method` to `endpoint`, nothing added, no body.
    pub fn new(endpoint: Endpoint, method: Method) -> Request {
        Request {
            endpoint,
            method,
            headers: Vec::new(),
            query: Vec::new(),
            auth: Auth::None,
            body: None,
        }
    }

    /// A `GET` of a plain URL.
    pub fn get(url: &str) -> Request {
        Request::new(Endpoint::HttpUrl(url.to_string()), Method::Get)
    }

    /// The request with `body`.
    pub fn with_body(mut self, body: Option<Vec<u8>>) -> Request {
        self.body = body;
        self
    }

    /// The request authenticated by `auth`.
    pub fn with_auth(mut self, auth: Auth) -> Request {
        self.auth = auth;
        self
    }

    /// `path` with this request's query added (`?a=1&b=2`, after any query
    /// `path` already has).
    pub fn path_with_query(&self, path: &str) -> String {
        let mut out = path.to_string();
        for (i, (name, value)) in self.query.iter().enumerate() {
            let sep = if i == 0 && !path.contains('?') {
                '?'
            } else {
                '&'
            };
            out.push(sep);
            out.push_str(name);
            out.push('=');
            out.push_str(value);
        }
        out
    }

    /// This request's header lines, each ended by CRLF.
    pub fn header_lines(&self) -> String {
        self.headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_round_trip_and_others_are_kept() {
        for name in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "PURGE"] {
            assert_eq!(Method::from(name).as_str(), name);
        }
        assert_eq!(Method::from("PURGE"), Method::Other("PURGE".into()));
        assert!(Method::Patch.sends_body() && !Method::Get.sends_body());
    }

    #[test]
    fn query_and_headers_are_added_in_order() {
        let mut r = Request::get("http://a/b");
        assert_eq!(r.path_with_query("/p"), "/p");
        r.query = vec![("resourceVersion", "0".into()), ("x", "y".into())];
        assert_eq!(r.path_with_query("/p"), "/p?resourceVersion=0&x=y");
        assert_eq!(r.path_with_query("/p?a=1"), "/p?a=1&resourceVersion=0&x=y");
        r.headers = vec![("Accept", "application/json".into())];
        assert_eq!(r.header_lines(), "Accept: application/json\r\n");
    }
}
