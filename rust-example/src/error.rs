//! The error of every fallible call: the library's status and its message.

use std::fmt;

use crate::sys;

/// What kind of failure a call reported (`sci_status` without `SCI_OK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// NULL / too-small struct / bad value; also a layout JSON the wrapper rejects.
    InvalidArgument,
    /// A malformed wire message (nothing was applied).
    Decode,
    /// A socket or thread could not be set up.
    Io,
    NoMemory,
    BufferTooSmall,
    /// A bug in the library.
    Internal,
    /// A status this wrapper does not know (a newer library).
    Other(i32),
}

impl Status {
    /// `None` for `SCI_OK`.
    pub fn from_raw(status: sys::sci_status) -> Option<Status> {
        Some(match status {
            sys::SCI_OK => return None,
            sys::SCI_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::SCI_ERR_DECODE => Status::Decode,
            sys::SCI_ERR_IO => Status::Io,
            sys::SCI_ERR_NO_MEMORY => Status::NoMemory,
            sys::SCI_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::SCI_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    /// The `SCI_ERR_*` value.
    pub fn code(self) -> sys::sci_status {
        match self {
            Status::InvalidArgument => sys::SCI_ERR_INVALID_ARGUMENT,
            Status::Decode => sys::SCI_ERR_DECODE,
            Status::Io => sys::SCI_ERR_IO,
            Status::NoMemory => sys::SCI_ERR_NO_MEMORY,
            Status::BufferTooSmall => sys::SCI_ERR_BUFFER_TOO_SMALL,
            Status::Internal => sys::SCI_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Status::InvalidArgument => "SCI_ERR_INVALID_ARGUMENT",
            Status::Decode => "SCI_ERR_DECODE",
            Status::Io => "SCI_ERR_IO",
            Status::NoMemory => "SCI_ERR_NO_MEMORY",
            Status::BufferTooSmall => "SCI_ERR_BUFFER_TOO_SMALL",
            Status::Internal => "SCI_ERR_INTERNAL",
            Status::Other(_) => "unknown status",
        }
    }
}

/// A failed call: its status and the message the library recorded for it
/// (`sci_last_error()` read on the failing thread, right after the call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's message, naming the function and the argument
    /// (e.g. `"sci_layout_new: spec->page_size is 0"`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Status::Other(code) => write!(f, "{} (status {})", self.message, code),
            status => write!(f, "{} ({})", self.message, status.name()),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
