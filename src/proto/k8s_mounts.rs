//! drainit's own container as the kubelet's mounts name it: the kubelet
//! bind-mounts each container's termination-message file from
//! `<kubelet root>/pods/<pod uid>/containers/<container>/<id>`, so the
//! roots in `/proc/self/mountinfo` say which container of which pod this
//! process runs in, whatever its command or image says. Pure: text in,
//! names out.

use crate::proto::k8s::is_label;

/// Most mountinfo bytes read (a container has a few dozen mounts; a host
/// mount namespace may have thousands).
pub const MOUNTINFO_LIMIT: usize = 1024 * 1024;
/// Most (pod, container) pairs kept from one mountinfo (a node plugin that
/// mounts the kubelet's directory sees every pod's).
const PAIRS: usize = 256;
/// Longest pod uid taken (a uid is 36 characters).
const UID_LIMIT: usize = 64;

/// A container the kubelet mounted a file of into this mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    pub pod_uid: String,
    pub container: String,
}

/// The containers named by the roots of `mountinfo`'s mounts (its fourth
/// field), each once; none when there are more than `PAIRS` (a cut list
/// could name one container where the whole one names several).
pub fn mounted(mountinfo: &[u8]) -> Vec<Mounted> {
    let mut found: Vec<Mounted> = Vec::new();
    let text = String::from_utf8_lossy(mountinfo);
    for line in text.lines() {
        let Some(root) = line.split(' ').nth(3) else {
            continue;
        };
        let Some(m) = from_root(root) else {
            continue;
        };
        if !found.contains(&m) {
            if found.len() == PAIRS {
                return Vec::new();
            }
            found.push(m);
        }
    }
    found
}

/// `…/pods/<uid>/containers/<name>/<id>`: the pod's uid and the name.
fn from_root(root: &str) -> Option<Mounted> {
    let parts: Vec<&str> = root.split('/').collect();
    parts.windows(5).find_map(|w| {
        let uid_ok = !w[1].is_empty()
            && w[1].len() <= UID_LIMIT
            && w[1].bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        (w[0] == "pods" && uid_ok && w[2] == "containers" && is_label(w[3]) && !w[4].is_empty())
            .then(|| Mounted {
                pod_uid: w[1].to_string(),
                container: w[3].to_string(),
            })
    })
}

/// The one container of the pod `uid` (any pod when it is not known) that
/// the mounts name; None when they name none or several.
pub fn own_container<'a>(mounted: &'a [Mounted], uid: Option<&str>) -> Option<&'a str> {
    let mut names = mounted
        .iter()
        .filter(|m| uid.map_or(true, |u| m.pod_uid == u))
        .map(|m| m.container.as_str());
    let first = names.next()?;
    names.all(|n| n == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f8a3c2e-5b1d-4e6f-9a7b-1c2d3e4f5a6b";

    fn line(root: &str, point: &str) -> String {
        format!("2301 2290 259:1 {root} {point} rw,relatime - ext4 /dev/nvme0n1p1 rw\n")
    }

    #[test]
    fn the_termination_log_names_the_container() {
        let info = [
            line("/", "/"),
            line(
                &format!("/var/lib/kubelet/pods/{UID}/etc-hosts"),
                "/etc/hosts",
            ),
            line(
                &format!("/var/lib/kubelet/pods/{UID}/containers/worker/3b2c1a0f"),
                "/dev/termination-log",
            ),
            line(
                &format!(
                    "/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~projected/kube-api-access-x"
                ),
                "/var/run/secrets/kubernetes.io/serviceaccount",
            ),
        ]
        .concat();
        let found = mounted(info.as_bytes());
        assert_eq!(
            found,
            [Mounted {
                pod_uid: UID.into(),
                container: "worker".into()
            }]
        );
        assert_eq!(own_container(&found, Some(UID)), Some("worker"));
        assert_eq!(own_container(&found, None), Some("worker"));
        assert_eq!(own_container(&found, Some("another-pod")), None);
    }

    #[test]
    fn a_kubelet_root_of_its_own_filesystem_still_names_it() {
        // /var/lib/kubelet on its own disk: the root is relative to it.
        let info = line(
            &format!("/pods/{UID}/containers/app/0"),
            "/dev/termination-log",
        );
        let found = mounted(info.as_bytes());
        assert_eq!(own_container(&found, Some(UID)), Some("app"));
    }

    #[test]
    fn two_names_or_none_name_nothing() {
        let info = [
            line(&format!("/pods/{UID}/containers/app/0"), "/a"),
            line(&format!("/pods/{UID}/containers/proxy/0"), "/b"),
        ]
        .concat();
        assert_eq!(own_container(&mounted(info.as_bytes()), Some(UID)), None);
        for bad in [
            format!("/pods/{UID}/containers/app"),
            format!("/pods/{UID}/containers/Not_A_Label/0"),
            "/pods/not a uid/containers/app/0".into(),
            format!("/pods/{}/containers/app/0", "a".repeat(65)),
            "garbage".into(),
        ] {
            assert_eq!(mounted(line(&bad, "/x").as_bytes()), [], "{bad}");
        }
        assert_eq!(mounted(b"short line\n\xff\xfe"), []);
    }

    #[test]
    fn past_the_bound_the_mounts_name_nothing() {
        let other = |i: usize| line(&format!("/pods/{i:08x}-0000/containers/c/0"), "/x");
        let full: String = (0..PAIRS).map(other).collect();
        assert_eq!(mounted(full.as_bytes()).len(), PAIRS);
        // This pod's two containers past the bound: a cut list would name
        // one of them; none is named.
        let past = format!(
            "{full}{}{}",
            line(&format!("/pods/{UID}/containers/app/0"), "/a"),
            line(&format!("/pods/{UID}/containers/side/0"), "/b")
        );
        let found = mounted(past.as_bytes());
        assert_eq!(own_container(&found, Some(UID)), None);
        assert!(found.is_empty());
    }
}
