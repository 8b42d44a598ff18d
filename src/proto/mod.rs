//! Pure codecs: bytes in, values out; no I/O, fuzzed directly.

pub mod drain_body;
pub mod ecs_body;
pub mod exchange;
pub mod http;
pub mod http_decoder;
pub mod http_request;
pub mod json;
pub mod k8s;
pub mod k8s_host;
pub mod k8s_mounts;
pub mod k8s_pod;
pub mod k8s_pod_read;
pub mod k8s_record;
pub mod notify_msg;
