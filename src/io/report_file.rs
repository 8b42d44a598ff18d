//! The `--exit-report` file: checked before the child starts (its
//! directory made if missing; anything but a regular file, or a place that
//! cannot be written, refused), and written at exit without ever blocking:
//! opened non-blocking, so a FIFO with no reader is an error (ENXIO), not
//! a wait that outlives the app.

use std::ffi::CString;
use std::fs::DirBuilder;
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::path::Path;

/// File systems whose files are not reports: procfs and sysfs.
const PSEUDO_FS: [i64; 2] = [0x9fa0, 0x6265_6572];

fn writable(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the path"))?;
    // SAFETY: access with a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn on_pseudo_fs(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes only into `buf`.
    unsafe {
        let mut buf: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut buf) == 0 && PSEUDO_FS.contains(&(buf.f_type as i64))
    }
}

/// Checks the report's path before the child starts, and makes its
/// directory (0755) if it is missing. Never opens, never truncates.
pub fn prepare(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_dir() {
                return Err("is a directory".into());
            }
            if kind.is_fifo() || kind.is_socket() || kind.is_char_device() || kind.is_block_device()
            {
                return Err("is not a regular file (a FIFO, socket or device)".into());
            }
            if on_pseudo_fs(path) {
                return Err("is on /proc or /sys, not a file for a report".into());
            }
            writable(path).map_err(|e| format!("cannot be written: {e}"))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            if !dir.exists() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            if !dir.is_dir() {
                return Err(format!("{} is not a directory", dir.display()));
            }
            if on_pseudo_fs(dir) {
                return Err("is on /proc or /sys, not a place for a report".into());
            }
            writable(dir).map_err(|e| format!("cannot write in {}: {e}", dir.display()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Writes the report at exit, never waiting: a FIFO with no reader, a
/// full pipe or any other failure is an error to log, not a hang.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the path"))?;
    // SAFETY: open with a valid C string; the fd is owned at once.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NONBLOCK | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_are_no_report() {
        assert!(prepare(Path::new("/tmp"))
            .unwrap_err()
            .contains("directory"));
        assert!(prepare(Path::new("/proc/self/status")).is_err());
        assert!(prepare(Path::new("/dev/null")).is_err());
        let dir = std::env::temp_dir().join(format!("drainit-rf-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let report = dir.join("a/b/report.json");
        prepare(&report).unwrap();
        assert!(dir.join("a/b").is_dir(), "the directory is made");
        std::fs::write(&report, "kept").unwrap();
        prepare(&report).unwrap();
        assert_eq!(
            std::fs::read_to_string(&report).unwrap(),
            "kept",
            "not truncated"
        );
        write(&report, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
