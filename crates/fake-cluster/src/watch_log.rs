//! The watch log of one resource kind: every change in order, read by each watcher at its own
//! pace through a cursor, and dropped once every watcher has passed it.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Change, WatchEvent};

/// The watch log of one resource: consumers hold a cursor, and what every cursor has passed is
/// dropped, so the log holds only what some consumer has yet to see.
#[derive(Default)]
pub(super) struct WatchLog {
    /// The position of `events[0]` since the cluster started.
    pub(super) offset: u64,
    pub(super) events: Vec<WatchEvent>,
    pub(super) cursors: HashMap<u64, u64>,
    pub(super) next_cursor: u64,
}

impl WatchLog {
    pub(super) fn push(&mut self, change: Change, object: Arc<str>) {
        if !self.cursors.is_empty() {
            self.events.push(WatchEvent { change, object });
        } else {
            // Nobody is watching: nothing to keep.
            self.offset += 1;
        }
    }

    pub(super) fn end(&self) -> u64 {
        self.offset + self.events.len() as u64
    }

    pub(super) fn compact(&mut self) {
        let Some(low) = self.cursors.values().min().copied() else {
            self.offset = self.end();
            self.events.clear();
            return;
        };
        let drop = usize::try_from(low.saturating_sub(self.offset)).unwrap_or(usize::MAX);
        if drop > 0 && drop * 2 >= self.events.len() {
            self.events.drain(..drop.min(self.events.len()));
            self.offset = low;
        }
    }
}
