//! What drainit reads from /proc: its own live children, and the SIGTERM
//! to every process left behind after the main child (`--orphan-grace`,
//! and the ended child's process group as dumb-init signals it).

use log::warn;

/// SIGTERM to every process left behind (`pid1`: drainit is PID 1 of its
/// namespace); false when there is none.
pub fn terminate_others(pid1: bool) -> bool {
    if pid1 {
        // As PID 1, kill(-1) reaches every process in the namespace (but
        // not us), descendants of orphans included; ESRCH says there is
        // none. No /proc file needed.
        // SAFETY: kill has no memory effects.
        return unsafe { libc::kill(-1, libc::SIGTERM) } == 0;
    }
    // Not PID 1, kill(-1) would reach the whole host: signal our own
    // children only. They are not reaped yet, so their PIDs are ours.
    let children = own_children();
    for &pid in &children {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    !children.is_empty()
}

/// `signo` to what the ended child `pid` left in its process group. The
/// group's id cannot be reused while a member lives, so this reaches only
/// the child's own group; an empty group (ESRCH) is the usual case and no
/// failure, anything else is one debug line.
pub fn signal_group_left(pid: i32, signo: i32) {
    // SAFETY: kill has no memory effects.
    if unsafe { libc::kill(-pid, signo) } != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::ESRCH) {
            log::debug!("signalling process group {pid} after the child ended: {error}");
        }
    }
}

/// drainit's live children, from /proc (orphans re-parented to it included):
/// the per-thread `children` files, or, where the kernel has none
/// (no CONFIG_PROC_CHILDREN), every process's parent in `/proc/PID/stat`.
pub fn own_children() -> Vec<i32> {
    let mut out = Vec::new();
    let mut found_file = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                found_file = true;
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
    }
    if !found_file {
        let me = std::process::id() as i32;
        // Not even drainit's own entry: no procfs there (a sandbox).
        if std::fs::metadata("/proc/self/stat").is_err() {
            // Called once per run (when the child ends): one warning.
            warn!("--orphan-grace: no /proc here; cannot find the remaining processes to signal");
        }
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<i32>().ok())
                else {
                    continue;
                };
                let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
                if parent_in_stat(&stat) == Some(me) {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// The parent PID from a `/proc/PID/stat` line; the command name in
/// parentheses may itself contain spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<i32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_from_stat_lines() {
        assert_eq!(parent_in_stat("42 (sleep) S 7 42 1 0"), Some(7));
        assert_eq!(parent_in_stat("42 (a) b) (c) R 9 42"), Some(9));
        assert_eq!(parent_in_stat("garbage"), None);
        assert_eq!(parent_in_stat(""), None);
    }
}
