//! How drainit ends: the typed `Outcome` of a run and its one mapping to a
//! process exit code. Nothing else in drainit decides the exit status.

/// Why the child could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpawnFailure {
    /// The program does not exist (ENOENT, ENOTDIR): 127, as shells say.
    NotFound,
    /// It exists but cannot be executed (EACCES, ENOEXEC, EISDIR...): 126.
    NotExecutable,
    /// Anything else (fork failed, out of memory...): 125.
    Other,
}

/// The final state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The child exited by itself with this code.
    Exited(i32),
    /// The child was killed by this signal, not by drainit's escalation.
    Signaled(i32),
    /// The child could not be started.
    SpawnFailed(SpawnFailure),
}

/// Exit-code settings that come from the command line.
#[derive(Debug, Clone, Default)]
pub struct ExitPolicy {
    /// tini's `-e`: these codes of the child (after 128+N) become 0.
    pub remap_to_zero: Vec<u8>,
}

impl Outcome {
    /// The single mapping from an outcome to drainit's exit code.
    pub fn exit_code(&self, policy: &ExitPolicy) -> u8 {
        let child_code = match *self {
            Outcome::Exited(code) => (code & 0xff) as u8,
            // Signals go up to SIGRTMAX (64), so 128+N always fits.
            Outcome::Signaled(signo) => (128 + signo.clamp(0, 127)) as u8,
            Outcome::SpawnFailed(SpawnFailure::NotFound) => return 127,
            Outcome::SpawnFailed(SpawnFailure::NotExecutable) => return 126,
            Outcome::SpawnFailed(SpawnFailure::Other) => return 125,
        };
        if policy.remap_to_zero.contains(&child_code) {
            0
        } else {
            child_code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(outcome: Outcome, remap: &[u8]) -> u8 {
        outcome.exit_code(&ExitPolicy {
            remap_to_zero: remap.to_vec(),
        })
    }

    #[test]
    fn every_exit_code_passes_through() {
        for n in 0..=255 {
            assert_eq!(code(Outcome::Exited(n), &[]), n as u8);
        }
    }

    #[test]
    fn signals_are_128_plus_n_not_the_raw_number() {
        for signo in 1..=64 {
            assert_eq!(code(Outcome::Signaled(signo), &[]), 128 + signo as u8);
        }
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[]), 143);
        assert_eq!(code(Outcome::Signaled(libc::SIGKILL), &[]), 137);
    }

    #[test]
    fn remap_applies_after_128_plus_n() {
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[143]), 0);
        assert_eq!(code(Outcome::Signaled(libc::SIGTERM), &[15]), 143);
        assert_eq!(code(Outcome::Exited(3), &[3, 4]), 0);
        assert_eq!(code(Outcome::Exited(5), &[3, 4]), 5);
        for n in 0..=255 {
            assert_eq!(code(Outcome::Exited(n), &[n as u8]), 0);
        }
    }

    #[test]
    fn spawn_failures_are_not_remapped() {
        assert_eq!(
            code(Outcome::SpawnFailed(SpawnFailure::NotFound), &[127]),
            127
        );
        assert_eq!(
            code(Outcome::SpawnFailed(SpawnFailure::NotExecutable), &[126]),
            126
        );
        assert_eq!(code(Outcome::SpawnFailed(SpawnFailure::Other), &[125]), 125);
    }
}
