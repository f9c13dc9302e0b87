//! Where every command writes what it found: standard output, where a reader that stops early
//! (`jobwarden check *.yaml | head`) is no error. `print!` panics on a closed pipe; this writer
//! takes the first `BrokenPipe` as the reader's "enough", drops every later write, and lets the
//! command run to its end, so its exit status still counts every input (`set -o pipefail` sees
//! the same verdict with or without `| head`). Any other write error is a real one.

use std::io::{self, ErrorKind, StdoutLock, Write};

pub struct Output {
    out: StdoutLock<'static>,
    reader_gone: bool,
}

impl Output {
    pub fn stdout() -> Self {
        Output {
            out: io::stdout().lock(),
            reader_gone: false,
        }
    }

    /// All of `text`, flushed: what a command that prints one piece does.
    pub fn print(text: &[u8]) -> io::Result<()> {
        let mut out = Output::stdout();
        out.write_all(text)?;
        out.flush()
    }

    fn absorb_closed_pipe<T>(&mut self, result: io::Result<T>, written: T) -> io::Result<T> {
        match result {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.reader_gone = true;
                Ok(written)
            }
            other => other,
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.reader_gone {
            return Ok(buf.len());
        }
        let result = self.out.write(buf);
        self.absorb_closed_pipe(result, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.reader_gone {
            return Ok(());
        }
        let result = self.out.flush();
        self.absorb_closed_pipe(result, ())
    }
}
