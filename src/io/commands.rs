//! Commands and files as drain sources and stop hooks: parsing and
//! validating a command (its program found on `PATH` once, at start),
//! starting one in its own process group, killing that group, and looking
//! at a drain file's time (the verdict is the core's). The one reaper
//! hands back every command's status.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::core::event::Seen;
use crate::core::settings::Cmd;

/// The search path when `PATH` is unset, as execvp and shells use.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Splits `text` with shell quoting rules (no shell: no variables, globs or
/// pipes) and finds its program on `path` (`PATH`, or the default).
pub fn parse_command(text: &str, path: Option<&str>) -> Result<Cmd, String> {
    let argv = shlex::split(text).ok_or("unclosed quote or trailing backslash")?;
    let Some(first) = argv.first() else {
        return Err("empty command".into());
    };
    if first.is_empty() {
        return Err("empty program name".into());
    }
    let program = if first.contains('/') {
        let p = PathBuf::from(first);
        check_executable(&p)?;
        p
    } else {
        find_program(first, path.unwrap_or(DEFAULT_PATH))?
    };
    Ok(Cmd {
        text: text.trim().to_string(),
        argv,
        program,
        dir: None,
    })
}

fn check_executable(path: &Path) -> Result<(), String> {
    let shown = || crate::util::text::echo(&path.to_string_lossy()).into_owned();
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", shown()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{} is not an executable file", shown()));
    }
    Ok(())
}

fn find_program(name: &str, path: &str) -> Result<PathBuf, String> {
    let mut not_executable = None;
    for dir in path.split(':') {
        // An empty entry means the current directory, as for execvp.
        let candidate = Path::new(if dir.is_empty() { "." } else { dir }).join(name);
        match check_executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if candidate.exists() => not_executable = Some(e),
            Err(_) => {}
        }
    }
    Err(not_executable.unwrap_or_else(|| {
        format!(
            "program {:?} not found in PATH",
            crate::util::text::echo(name)
        )
    }))
}

/// Starts `cmd` in its own process group (pgid = its pid), stdin from
/// /dev/null, stdout and stderr to drainit's stderr, with a clean signal
/// state: an empty mask and SIGPIPE at its default (the standard library
/// gave neither: a command inherited drainit's full mask, and glibc's
/// `posix_spawn` set 32 and 33 to SIG_IGN). drainit's own spawner
/// (`spawn::spawn_command`) starts it; the reaper collects it. It runs in
/// `cmd.dir` when drainit left the child's start directory; a directory
/// that is gone by then is an error, not a command run elsewhere.
pub fn start(cmd: &Cmd) -> io::Result<i32> {
    crate::io::spawn::spawn_command(&cmd.program, &cmd.argv, cmd.dir.as_deref())
}

/// SIGKILL to a command's process group (its leader's pid), and what it
/// left behind there. ESRCH (nothing left) is fine.
pub fn kill_group(pgid: i32) {
    // SAFETY: kill has no memory effects; a negative pid names a group,
    // which cannot be reused while any member of it is alive.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

/// One look at a drain file: its time, or why there is none. Whether
/// that makes it ready is the core's (`core::sources::file::verdict`).
pub fn look_at_file(path: &Path, stop_began: SystemTime) -> Seen {
    match std::fs::metadata(path).and_then(|m| m.modified()) {
        Ok(mtime) => Seen::Written { mtime, stop_began },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Seen::Absent,
        Err(e) => Seen::Unreadable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::Answer;
    use crate::core::sources::file::verdict;
    use std::time::Duration;

    fn check_file(path: &Path, stop_began: SystemTime) -> Answer {
        verdict(&look_at_file(path, stop_began))
    }

    fn bin_sh() -> Option<&'static str> {
        Some("/usr/bin:/bin")
    }

    #[test]
    fn commands_split_with_shell_quoting() {
        let c = parse_command("sh -c 'echo \"a b\"; exit 3'", bin_sh()).unwrap();
        assert_eq!(c.argv, ["sh", "-c", "echo \"a b\"; exit 3"]);
        assert!(c.program.ends_with("sh"));
        let c = parse_command("true a\\ b \"c d\"", bin_sh()).unwrap();
        assert_eq!(c.argv, ["true", "a b", "c d"]);
        let c = parse_command("/bin/true", None).unwrap();
        assert_eq!(c.program, PathBuf::from("/bin/true"));
    }

    #[test]
    fn bad_commands_are_refused_with_a_reason() {
        for (text, needle) in [
            ("", "empty command"),
            ("   ", "empty command"),
            ("sh -c 'echo", "unclosed quote"),
            ("echo \"x", "unclosed quote"),
            ("no-such-program-drainit", "not found"),
            ("/no/such/program", "No such file"),
            ("/etc/passwd", "not an executable"),
            ("/tmp", "not an executable"),
            ("''", "empty program"),
        ] {
            let e = parse_command(text, bin_sh()).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn drain_files_count_only_from_the_stop_on() {
        let dir = std::env::temp_dir().join(format!("drainit-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("drained");
        let _ = std::fs::remove_file(&file);
        let began = SystemTime::now();
        assert!(!check_file(&file, began).is_ready(), "absent");
        std::fs::write(&file, b"").unwrap();
        assert!(check_file(&file, began).is_ready());
        let later = SystemTime::now() + Duration::from_secs(60);
        assert_eq!(
            check_file(&file, later),
            Answer::NotReady("older than the stop".into())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
