//! Exit codes of the `spate` command: what a script can tell apart without parsing messages.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success: every file is in place and verified (BLAKE3) by the receiver |
//! | 1 | any other error |
//! | 2 | usage: unknown option, bad value (from the argument parser) |
//! | 3 | bad input here: a missing or unreadable source, a bad destination, a bad token or key file |
//! | 4 | the server could not be reached: no answer, name not resolved |
//! | 5 | the server refused: key not authorized, a limit, busy, a path it will not write |
//! | 6 | the server's key is not the trusted one (changed, or unknown with `--strict-host-keys`) |
//! | 7 | the transfer failed after it began: the path went silent, the receiver gave up (disk full, a file failed verification); run it again with `--resume` |
//!
//! Errors are tagged where their cause is known ([`tag`]); [`code`] reads the tag back.

/// Why the command failed, as an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Any other error.
    Other = 1,
    /// A missing or unreadable source, a bad destination, token or key file.
    Input = 3,
    /// No answer from the server.
    Unreachable = 4,
    /// The server refused.
    Refused = 5,
    /// The server's key is not the trusted one.
    UntrustedServer = 6,
    /// The transfer failed after it began.
    Interrupted = 7,
}

/// An error with its exit code; displays as the error it wraps.
#[derive(Debug)]
struct Tagged {
    exit: Exit,
    error: anyhow::Error,
}

impl std::fmt::Display for Tagged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for Tagged {}

/// Tag `error` with `exit` (a later tag does not replace an earlier one).
pub fn tag(error: anyhow::Error, exit: Exit) -> anyhow::Error {
    if error.downcast_ref::<Tagged>().is_some() {
        return error;
    }
    Tagged { exit, error }.into()
}

/// The error of type `T` in `error`'s chain, looking inside a tag.
pub fn find<T: std::error::Error + Send + Sync + 'static>(error: &anyhow::Error) -> Option<&T> {
    let inner = error.downcast_ref::<Tagged>().map_or(error, |t| &t.error);
    inner.chain().find_map(|c| c.downcast_ref::<T>())
}

/// The exit code for `error`.
pub fn code(error: &anyhow::Error) -> u8 {
    error
        .downcast_ref::<Tagged>()
        .map_or(Exit::Other, |t| t.exit) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_keep_the_message_and_the_first_code() {
        let e = anyhow::anyhow!("inner").context("outer");
        let t = tag(e, Exit::Refused);
        assert_eq!(format!("{t:#}"), "outer: inner");
        assert_eq!(code(&t), 5);
        assert_eq!(code(&tag(t, Exit::Input)), 5);
        assert_eq!(code(&anyhow::anyhow!("plain")), 1);
    }
}
