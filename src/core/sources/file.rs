//! `--drain-file`: a drain source asked by one look at a file's time (the
//! shell's `stat`, no thread); it is ready once written since the stop
//! began. The verdict is here; io only looks.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::core::event::{Answer, Seen};
use crate::core::settings::Config;
use crate::core::sources::{About, AnyKind, How, Kind, Read, Reply};

/// Filesystem timestamps come from a coarse clock (one tick behind the one
/// drainit reads), so a file written just after the stop began may carry a
/// time slightly before it; this much earlier still counts.
pub const MTIME_SLACK: Duration = Duration::from_millis(20);

pub struct File {
    path: PathBuf,
    shown: String,
}

/// The file sources of a run, in the order given.
pub fn from_config(config: &Config) -> impl Iterator<Item = AnyKind> + '_ {
    config.drain_files.iter().map(|path| -> AnyKind {
        AnyKind::File(File {
            path: path.clone(),
            shown: path.display().to_string(),
        })
    })
}

/// The file's time, with the clock slack, is not before the stop. Checked
/// arithmetic: an app can set any mtime (`touch -d`, `utimensat` up to the
/// file system's limit), and `SystemTime + Duration` panics on overflow.
pub fn written_during_stop(mtime: SystemTime, stop_began: SystemTime) -> bool {
    mtime
        .checked_add(MTIME_SLACK)
        .map_or(true, |late| late >= stop_began)
}

/// What a look at a drain file says: present and written during this stop.
pub fn verdict(seen: &Seen) -> Answer {
    match seen {
        Seen::Written { mtime, stop_began } if written_during_stop(*mtime, *stop_began) => {
            Answer::Ready
        }
        Seen::Written { .. } => Answer::NotReady("older than the stop".into()),
        Seen::Absent => Answer::NotReady("absent".into()),
        Seen::Unreadable(why) => Answer::NotReady(format!("cannot read: {why}")),
    }
}

impl Kind for File {
    /// A file's content is the app's own business: it never drives task
    /// protection.
    fn about(&self) -> About {
        About {
            name: "file",
            target: self.shown.clone(),
            public: self.shown.clone(),
            protects: false,
        }
    }

    fn ask(&self) -> How {
        How::Look(self.path.clone())
    }

    fn read(&self, reply: Reply<'_>) -> Read {
        Read::answer(match reply {
            Reply::File(seen) => verdict(seen),
            _ => Answer::NoAnswer("not a look".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_file_time_is_judged_without_overflow() {
        let stop = SystemTime::now();
        // The largest time a file system can hold (tmpfs: any i64 second).
        let far = SystemTime::UNIX_EPOCH + Duration::new(i64::MAX as u64, 999_999_999);
        assert!(written_during_stop(far, stop));
        assert!(!written_during_stop(SystemTime::UNIX_EPOCH, stop));
        assert!(written_during_stop(stop - MTIME_SLACK, stop));
    }
}
