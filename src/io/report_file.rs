//! The `--exit-report` file: checked before the child starts (its
//! directory made if missing; anything but a regular file, or a place that
//! cannot be written, refused), its directory kept open from then on, and
//! written at exit without ever blocking and without following a link:
//! created in that directory with `O_NOFOLLOW`, non-blocking, and written
//! only when it is a regular file, so a link, FIFO, socket or device the
//! app planted after the start is refused, never written through. A new
//! file renamed over the name, or where that fails (a full disk too) the
//! file written in place: never the earlier run's report left for this
//! one's.

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

/// The report's place, fixed at start: its directory, open (`O_PATH`),
/// and its name there. Links in the path are followed once, at start, by
/// whoever set the path up; none planted later is.
#[derive(Debug)]
pub struct ReportFile {
    dir: OwnedFd,
    name: CString,
}

/// Checks the report's path before the child starts, makes its directory
/// (0755) if it is missing, and keeps that directory open. Never opens the
/// file, never truncates it.
pub fn prepare(path: &Path) -> Result<ReportFile, String> {
    // The path as it resolves now: a link the operator put there (at start,
    // before the app runs) is followed this once, dangling or not.
    let resolved = resolve(path)?;
    check(&resolved)?;
    let (Some(dir), Some(name)) = (resolved.parent(), resolved.file_name()) else {
        return Err("names no file".into());
    };
    let dir_c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| "has a NUL byte in its path".to_string())?;
    let name =
        CString::new(name.as_bytes()).map_err(|_| "has a NUL byte in its name".to_string())?;
    // SAFETY: open with a valid C string; the fd is owned at once.
    let fd = unsafe {
        libc::open(
            dir_c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(format!("cannot open {}: {e}", shown(dir)));
    }
    Ok(ReportFile {
        // SAFETY: a fresh descriptor nothing else owns.
        dir: unsafe { OwnedFd::from_raw_fd(fd) },
        name,
    })
}

/// `path` with the links of its last component followed (at most 8) and
/// its directory made canonical; a name that is not there yet is kept.
fn resolve(path: &Path) -> Result<std::path::PathBuf, String> {
    let mut path = path.to_path_buf();
    let mut links = 0;
    while std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        links += 1;
        if links > 8 {
            return Err("is a chain of more than 8 symbolic links".into());
        }
        let target = std::fs::read_link(&path).map_err(|e| e.to_string())?;
        path = match path.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name() else {
        return Err("names no file".into());
    };
    if !dir.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", shown(dir)))?;
    }
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", shown(dir)))?;
    Ok(dir.join(name))
}

fn check(path: &Path) -> Result<(), String> {
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
            if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
                return Err(
                    "has other hard links: a report is written only to a file of its own".into(),
                );
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
                    .map_err(|e| format!("cannot create {}: {e}", shown(dir)))?;
            }
            if !dir.is_dir() {
                return Err(format!("{} is not a directory", shown(dir)));
            }
            if on_pseudo_fs(dir) {
                return Err("is on /proc or /sys, not a place for a report".into());
            }
            writable(dir).map_err(|e| format!("cannot write in {}: {e}", shown(dir)))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn refused(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what} now, not a regular file; not written"),
    )
}

impl ReportFile {
    /// Writes the report at exit, never waiting and never through a link:
    /// a symlink, a FIFO, socket or device is refused (an error to log, not
    /// a hang and not a write somewhere else). The report is written to a
    /// new file of its own in the directory and renamed over the name, so
    /// no file planted there (a hard link to someone else's) is ever
    /// opened for writing; where the name cannot be replaced (a file
    /// bind-mounted there, as Kubernetes' `/dev/termination-log`, or a
    /// directory drainit may not create in) or the new file cannot be
    /// written (a full disk) it is written in place, with the same
    /// refusals.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        self.refuse_what_is_there()?;
        match self.replace(bytes) {
            true => Ok(()),
            false => self.in_place(bytes),
        }
    }

    /// A link or anything but a regular file at the name, looked at
    /// without following or opening it (a device is never opened).
    fn refuse_what_is_there(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: fstatat writes only into `st`; the name is a C string.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            let rc = libc::fstatat(
                self.dir.as_raw_fd(),
                self.name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            );
            if rc == 0 {
                match st.st_mode & libc::S_IFMT {
                    libc::S_IFREG => {}
                    libc::S_IFLNK => return Err(refused("a symbolic link")),
                    _ => return Err(refused("a FIFO, socket, device or directory")),
                }
            }
        }
        Ok(())
    }

    /// `name` in the report's directory opened for writing, created if
    /// missing, never through a link (`O_NOFOLLOW`), with `extra` flags.
    fn open(&self, name: &CString, extra: libc::c_int) -> io::Result<std::fs::File> {
        use std::os::fd::AsRawFd;
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_NOFOLLOW
            | libc::O_NOCTTY
            | libc::O_CLOEXEC
            | extra;
        // SAFETY: openat with a valid C string; the fd is owned at once.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                flags,
                0o644 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The report in a new file (`O_EXCL`, never an existing one) renamed
    /// over the name: true when done, false when the name cannot be
    /// replaced that way or the new file could not be written (a full
    /// disk): then it is written in place, where the earlier report's
    /// blocks may hold it.
    fn replace(&self, bytes: &[u8]) -> bool {
        use std::os::fd::AsRawFd;
        let dir = self.dir.as_raw_fd();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for attempt in 0..4u32 {
            let temp = format!(
                ".{}.drainit-{}-{nanos}-{attempt}",
                self.name.to_string_lossy(),
                std::process::id()
            );
            let Ok(temp) = CString::new(temp) else {
                return false;
            };
            let mut file = match self.open(&temp, libc::O_EXCL) {
                Ok(file) => file,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(_) => return false,
            };
            let written = file.write_all(bytes).is_ok();
            drop(file);
            // SAFETY: renameat and unlinkat with valid C strings in our
            // directory; the name renamed over is replaced, never followed.
            let renamed = written
                && unsafe { libc::renameat(dir, temp.as_ptr(), dir, self.name.as_ptr()) } == 0;
            if !renamed {
                // SAFETY: as above. Its blocks are given back before the
                // write in place (a full disk).
                unsafe { libc::unlinkat(dir, temp.as_ptr(), 0) };
            }
            return renamed;
        }
        false
    }

    /// The report written into the file at the name, opened without
    /// following a link, only when it is a regular file of its own.
    fn in_place(&self, bytes: &[u8]) -> io::Result<()> {
        let mut file = match self.open(&self.name, libc::O_NONBLOCK) {
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refused("a symbolic link"))
            }
            opened => opened?,
        };
        // What was opened, not what was looked at: swapped in between, a
        // FIFO or a hard link to someone else's file is refused too.
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(refused("a FIFO, socket, device or directory"));
        }
        if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
            return Err(refused("a file with other hard links"));
        }
        file.set_len(0)?;
        // Not all of it (a full disk): an empty file, never the start of
        // a report or the earlier run's.
        file.write_all(bytes).inspect_err(|_| {
            let _ = file.set_len(0);
        })
    }
}

/// A path as an error echoes it: cut to 256 characters.
fn shown(path: &Path) -> String {
    crate::util::text::echo(&path.to_string_lossy()).into_owned()
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
        let file = prepare(&report).unwrap();
        file.write(b"newer").unwrap();
        file.write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "new");
        // A link planted after the start is refused, its target untouched.
        let target = dir.join("target");
        std::fs::write(&target, "secret").unwrap();
        std::fs::remove_file(&report).unwrap();
        std::os::unix::fs::symlink(&target, &report).unwrap();
        assert!(file.write(b"json").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret");
        // A hard link to it is replaced by a file of the report's own.
        std::fs::remove_file(&report).unwrap();
        std::fs::hard_link(&target, &report).unwrap();
        file.write(b"json").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret");
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "json");
        // ...and refused at start.
        std::fs::remove_file(&report).unwrap();
        std::fs::hard_link(&target, &report).unwrap();
        assert!(prepare(&report).unwrap_err().contains("hard links"));
        // A FIFO is never opened.
        std::fs::remove_file(&report).unwrap();
        let c = CString::new(report.as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(file.write(b"json").is_err());
        // The directory swapped for a link: the open directory is written.
        std::fs::remove_file(&report).unwrap();
        let moved = dir.join("moved");
        std::fs::rename(dir.join("a/b"), &moved).unwrap();
        std::os::unix::fs::symlink(&target, dir.join("a/b")).unwrap_or(());
        file.write(b"here").unwrap();
        assert_eq!(
            std::fs::read_to_string(moved.join("report.json")).unwrap(),
            "here"
        );
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&moved)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".drainit-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // A link the operator made before the start is followed then, even
        // to a file not there yet.
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(dir.join("out/real.json"), &link).unwrap();
        let linked = prepare(&link).unwrap();
        linked.write(b"via link").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("out/real.json")).unwrap(),
            "via link"
        );
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
