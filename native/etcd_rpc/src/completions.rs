//! Finished calls, handed to the event loop in batches: the runtime's thread queues each answer and
//! rings an eventfd only when the queue was empty; the loop, woken by the eventfd, takes the whole
//! queue at once. The runtime never takes the GIL, and a busy loop takes many answers a wake-up.

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// How a call ended: its answer's bytes, or gRPC's status code and message; for a stream, each
/// answer, then its end (Ended, or Failed).
pub enum Outcome {
    Answer(Bytes),
    Failed(i32, String),
    Ended,
}

pub struct Completions {
    queue: Mutex<Vec<(u64, Outcome)>>,
    eventfd: libc::c_int,
}

impl Completions {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; a negative answer is checked.
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Completions {
            queue: Mutex::new(Vec::new()),
            eventfd,
        })
    }

    /// The descriptor the event loop watches for reading.
    pub fn fd(&self) -> libc::c_int {
        self.eventfd
    }

    pub fn push(&self, call: u64, outcome: Outcome) {
        let first = {
            let mut queue = self
                .queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            queue.push((call, outcome));
            queue.len() == 1
        };
        if first {
            let one: u64 = 1;
            // SAFETY: writes the 8 bytes of `one`; an eventfd's counter cannot overflow in practice
            // (it is read back to zero at each take) and a failed ring leaves the next one to wake.
            unsafe { libc::write(self.eventfd, (&one as *const u64).cast(), 8) };
        }
    }

    /// Every finished call, oldest first; the eventfd is read back to zero first, so that a call
    /// finishing after the take rings again.
    pub fn take(&self) -> Vec<(u64, Outcome)> {
        let mut counter = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `counter`; EAGAIN (not rung) is fine.
        unsafe { libc::read(self.eventfd, counter.as_mut_ptr().cast(), 8) };
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::take(&mut *queue)
    }
}

impl Drop for Completions {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this struct's own and closed once.
        unsafe { libc::close(self.eventfd) };
    }
}

/// What one call or stream owes Python: its answers (`answer`) and one last outcome (`finish`);
/// dropped without finishing (its task panicked, or was dropped with the runtime), it finishes
/// with INTERNAL, so that no caller waits for an answer that cannot come.
pub struct Reply {
    call: u64,
    completions: Arc<Completions>,
    finished: bool,
}

impl Reply {
    pub fn new(call: u64, completions: Arc<Completions>) -> Self {
        Reply {
            call,
            completions,
            finished: false,
        }
    }

    pub fn call(&self) -> u64 {
        self.call
    }

    pub fn answer(&self, answer: Bytes) {
        self.completions.push(self.call, Outcome::Answer(answer));
    }

    pub fn finish(mut self, outcome: Outcome) {
        self.finished = true;
        self.completions.push(self.call, outcome);
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.finished {
            let message = "the etcd client's task ended without an answer".to_owned();
            self.completions.push(
                self.call,
                Outcome::Failed(tonic::Code::Internal as i32, message),
            );
        }
    }
}
