//! Writes to one case wait in line inside the process, before they take a connection.
//!
//! Every submission for one brand and e-mail address, and every product attached to that
//! case, updates the same row, and PostgreSQL makes each wait for the row lock of the one
//! before it, holding a pool connection all the while. A partner resending one customer's
//! enquiry or attach in a burst would so take every connection and stall every other case
//! behind it. Waiting here first, in arrival order, leaves one connection to the busy case
//! and the rest to the others. The database's lock still orders writes between replicas;
//! this only moves a replica's own queue out of the database.

use std::hash::{BuildHasher, Hash, RandomState};

use tokio::sync::{Mutex, MutexGuard};

/// Slots kept by default: with as many submissions in flight as a pool has connections, two
/// different cases rarely share one.
pub const DEFAULT_SLOTS: usize = 4096;

/// Queues by key. Keys share a fixed set of slots, chosen by a hash keyed per process, so
/// the memory is bounded and nobody can choose keys that collide; two keys that do share a
/// slot only wait for each other needlessly.
pub struct WriteQueue {
    slots: Box<[Mutex<()>]>,
    hasher: RandomState,
}

/// Held while it is a key's turn; dropping it lets the next one in.
pub type Turn<'a> = MutexGuard<'a, ()>;

impl WriteQueue {
    /// Queues over `slots` slots (at least one).
    pub fn new(slots: usize) -> Self {
        Self {
            slots: (0..slots.max(1)).map(|_| Mutex::new(())).collect(),
            hasher: RandomState::new(),
        }
    }

    /// Waits until it is `key`'s turn: after every earlier caller with the same key (or
    /// the same slot) has dropped its turn. Callers are served in the order they came.
    pub async fn wait<K: Hash + ?Sized>(&self, key: &K) -> Turn<'_> {
        self.slots[self.slot(key)].lock().await
    }

    /// The slot `key` waits in.
    fn slot<K: Hash + ?Sized>(&self, key: &K) -> usize {
        (self.hasher.hash_one(key) % self.slots.len() as u64) as usize
    }
}

impl Default for WriteQueue {
    fn default() -> Self {
        Self::new(DEFAULT_SLOTS)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn the_same_key_waits_for_the_turn_before_it() {
        let queue = WriteQueue::default();
        let first = queue.wait("brand_a/jane@example.com").await;
        assert!(
            tokio::time::timeout(SHORT, queue.wait("brand_a/jane@example.com"))
                .await
                .is_err(),
            "a second turn for the same key was given while the first was held"
        );
        drop(first);
        assert!(
            tokio::time::timeout(SHORT, queue.wait("brand_a/jane@example.com"))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn keys_in_different_slots_do_not_wait_for_each_other() {
        let queue = WriteQueue::default();
        let a = "brand_a/jane@example.com";
        let b = (0..)
            .map(|i| format!("brand_a/other{i}@example.com"))
            .find(|k| queue.slot(k.as_str()) != queue.slot(a))
            .expect("some key hashes to another slot");
        let _held = queue.wait(a).await;
        assert!(
            tokio::time::timeout(SHORT, queue.wait(b.as_str()))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn waiting_callers_are_served_in_arrival_order() {
        let queue = Arc::new(WriteQueue::new(1));
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let held = queue.wait("k").await;
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (queue, order) = (queue.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _turn = queue.wait("k").await;
                order.lock().unwrap().push(i);
            }));
            // Each caller is queued before the next one starts.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn zero_slots_means_one() {
        let queue = WriteQueue::new(0);
        assert_eq!(queue.slot("anything"), 0);
    }
}
