//! Mistakes that would otherwise pass in silence: a variable drainit does
//! not know under its prefix (`DRAINIT_DRAIN_ULR`), and a flag clap does
//! not know (`--grace-period`), each answered with the nearest known name.

use std::ffi::OsString;

use super::names::{is_test_suite_variable, Name, BUILD_VARIABLES, OTHER_DRAINIT_VARIABLES};
use super::Notice;
use crate::app::options::{self, OPTIONS};

/// The most unknown variables said at start, one line each; more are
/// counted in one last line.
pub const MAX_UNKNOWN_SAID: usize = 8;

/// The longest part of a name compared: no known name is near a longer one.
const MAX_COMPARED: usize = 64;

/// Edits from `a` to `b` (insertions, deletions, substitutions and swaps
/// of neighbours, so `ULR` is one from `URL`), of their first
/// `MAX_COMPARED` bytes.
pub fn distance(a: &str, b: &str) -> usize {
    let a = &a.as_bytes()[..a.len().min(MAX_COMPARED)];
    let b = &b.as_bytes()[..b.len().min(MAX_COMPARED)];
    // Three rows of the table: two back (for a swap), one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

/// The candidate nearest to `name` and how near. A candidate that `name`
/// extends (`--grace-period`, `--ecs-protection`,
/// `DRAINIT_GRACE_SECONDS`) counts one edit per four extra characters: the
/// extra is a guess at a longer name, not a typing slip.
pub fn nearest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, usize)> {
    candidates
        .into_iter()
        .map(|known| {
            let d = distance(name, known);
            match name.strip_prefix(known) {
                Some(extra) => (known, d.min(extra.len().div_ceil(4))),
                None => (known, d),
            }
        })
        .min_by_key(|&(_, d)| d)
}

/// The long option nearest to an unknown flag as typed (`--grace-period`,
/// `--grace-period=20s`), when it is near enough to be the one meant.
pub fn flag_suggestion(typed: &str) -> Option<String> {
    let name = typed.strip_prefix("--")?.split('=').next()?;
    let (known, d) = nearest(name, OPTIONS.iter().map(|o| o.long))?;
    (d <= (name.len() / 3).max(1)).then(|| format!("--{known}"))
}

/// One warning per variable of the environment that carries drainit's
/// prefix (or, called as tini or dumb-init, that init's) but is not one it
/// reads, naming the nearest it does read; at most `MAX_UNKNOWN_SAID`, in
/// the environment's order.
pub fn unknown_variables(names: impl IntoIterator<Item = OsString>, called: Name) -> Vec<Notice> {
    let mut notices = Vec::new();
    let mut unknown = 0;
    for name in names {
        let Some(near) = name
            .to_str()
            .and_then(|name| unknown_variable(name, called))
        else {
            continue;
        };
        unknown += 1;
        if unknown <= MAX_UNKNOWN_SAID {
            let name = name.to_string_lossy();
            notices.push(Notice::Warn(match near {
                Some(near) => {
                    format!("unknown variable {name} is ignored (the nearest known name is {near})")
                }
                None => format!("unknown variable {name} is ignored"),
            }));
        }
    }
    if unknown > MAX_UNKNOWN_SAID {
        notices.push(Notice::Warn(format!(
            "{} more unknown variables are ignored",
            unknown - MAX_UNKNOWN_SAID
        )));
    }
    notices
}

/// Some when `name` has a prefix drainit minds but is not a variable it
/// (or the init it is called as) reads: the nearest known name, when it
/// is within the bound flags use (`near_enough`).
fn unknown_variable(name: &str, called: Name) -> Option<Option<String>> {
    if let Some((prefix, known)) = called.variables() {
        if name.starts_with(prefix) {
            return match known.contains(&name) {
                true => None,
                false => Some(
                    nearest(name, known.iter().copied())
                        .filter(|&(_, d)| near_enough(&name[prefix.len()..], d))
                        .map(|(near, _)| near.to_string()),
                ),
            };
        }
    }
    let rest = name.strip_prefix("DRAINIT_")?;
    if OTHER_DRAINIT_VARIABLES.contains(&name)
        || BUILD_VARIABLES.contains(&name)
        || is_test_suite_variable(name)
    {
        return None;
    }
    // Compared as long names: `DRAIN_ULR` is `drain-ulr`.
    let long: String = rest
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let with_var = OPTIONS.iter().filter(|o| o.var).map(|o| o.long);
    let (near, d) = nearest(&long, with_var)?;
    // `DRAINIT_drain_url` is not `DRAINIT_DRAIN_URL`: only capitals and
    // underscores make the name drainit reads.
    let exact = !rest.bytes().any(|b| b == b'-' || b.is_ascii_lowercase());
    if d == 0 && exact {
        return None;
    }
    // The variables without an option compete too.
    let other = OTHER_DRAINIT_VARIABLES
        .iter()
        .map(|v| (*v, distance(name, v)))
        .min_by_key(|&(_, d)| d);
    let (near, d) = match other {
        Some((other, od)) if od < d => (other.to_string(), od),
        _ => (options::env_var(near), d),
    };
    Some(near_enough(rest, d).then_some(near))
}

/// The bound flags use (`flag_suggestion`): at most a third of the name
/// after its prefix, at least 1 edit.
fn near_enough(rest: &str, d: usize) -> bool {
    d <= (rest.len() / 3).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("URL", "ULR"), 1, "a swap is one edit");
        assert_eq!(distance("GRAC", "GRACE"), 1);
        assert_eq!(distance("", "ABC"), 3);
        assert_eq!(distance("SAME", "SAME"), 0);
        assert_eq!(distance("kitten", "sitting"), 3);
        // Only the first MAX_COMPARED bytes count: bounded work.
        let long = "X".repeat(100_000);
        assert_eq!(distance(&long, "X"), MAX_COMPARED - 1);
    }

    #[test]
    fn flags_near_enough_are_suggested() {
        for (typed, want) in [
            ("--grace-period", Some("--grace")),
            ("--grace-period=20s", Some("--grace")),
            ("--drain-ulr", Some("--drain-url")),
            ("--sreve", Some("--serve")),
            ("--ecs-protection", Some("--ecs-protect")),
            ("--zzzzzz", None),
            ("-z", None),
        ] {
            assert_eq!(flag_suggestion(typed).as_deref(), want, "{typed}");
        }
    }

    #[test]
    fn unknown_variables_by_name() {
        let names = |list: &[&str]| -> Vec<OsString> { list.iter().map(OsString::from).collect() };
        let said = |list: &[&str], called| {
            unknown_variables(names(list), called)
                .into_iter()
                .map(|n| match n {
                    Notice::Warn(text) => text,
                    Notice::Info(text) => panic!("not a warning: {text}"),
                })
                .collect::<Vec<_>>()
        };
        let known = [
            "DRAINIT_GRACE",
            "DRAINIT_LOG",
            "DRAINIT_VERBOSITY",
            "DRAINIT_REQUIRE_DOCKER",
            "PATH",
            "TINI_SUBREAPR",
        ];
        assert_eq!(said(&known, Name::Drainit), Vec::<String>::new());
        let got = said(&["DRAINIT_DRAIN_ULR", "PATH"], Name::Drainit);
        assert_eq!(
            got,
            ["unknown variable DRAINIT_DRAIN_ULR is ignored (the nearest known name is DRAINIT_DRAIN_URL)"]
        );
        let got = said(&["DRAINIT_drain_url"], Name::Drainit);
        assert!(got[0].ends_with("DRAINIT_DRAIN_URL)"), "{got:?}");
        let got = said(&["TINI_SUBREAPR", "TINI_VERBOSITY"], Name::Tini);
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with("TINI_SUBREAPER)"), "{got:?}");
        assert_eq!(
            said(&["DUMB_INIT_DEBUG"], Name::DumbInit),
            Vec::<String>::new()
        );
        // A build's variable is passed by in silence; a name nothing is
        // near is said without a guess.
        assert_eq!(
            said(&["DRAINIT_GIT_COMMIT"], Name::Drainit),
            Vec::<String>::new()
        );
        assert_eq!(
            said(&["DRAINIT_ZZZZZZZZZ_QQQQ"], Name::Drainit),
            ["unknown variable DRAINIT_ZZZZZZZZZ_QQQQ is ignored"]
        );
        assert_eq!(
            said(&["TINI_ZZZZZZZZZZ"], Name::Tini),
            ["unknown variable TINI_ZZZZZZZZZZ is ignored"]
        );
        assert_eq!(
            said(&["DRAINIT_TEST_FAULT"], Name::Drainit).len(),
            usize::from(!cfg!(feature = "fault-injection"))
        );
    }
}
