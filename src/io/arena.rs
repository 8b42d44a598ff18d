//! The start-up allocator: allocations come from a static arena by bump,
//! and the system allocator takes over when it is full. What start-up
//! throws away (command-line parsing) is given back: once nothing in the
//! arena is live, it starts again from its beginning, and `trim` hands its
//! dirty pages back to the kernel.
//!
//! Why: musl's allocator hands memory back to the kernel eagerly, so the
//! burst of short-lived allocations clap makes at start-up cost dozens of
//! mmap/munmap calls and their TLB flushes, which made `drainit -- app`
//! start measurably slower than tini. A bump arena turns them into pointer
//! arithmetic; reclaiming it keeps that burst out of the idle process's
//! private memory. Only the binary installs it (see `main.rs`), and
//! `app::main` reclaims it after the configuration is read:
//!
//! 1. everything start-up allocates goes to the shared part;
//! 2. the configuration is copied inside `keeping`, into the kept part,
//!    which is never reused;
//! 3. the original is dropped: nothing in the shared part is live, so it
//!    starts again from its beginning;
//! 4. `trim` returns the pages the burst dirtied to the kernel.
//!
//! Freed memory is otherwise reused only when it was the last handed out
//! (a vector that grows at the end grows in place).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The whole block: untouched pages of `.bss` cost no memory.
const SIZE: usize = 128 * 1024;
/// The kept part, `[0, KEPT)`: the configuration copied there by
/// `keeping` (about 1 KiB with a few drain sources). What does not fit
/// comes from the system allocator.
const KEPT: usize = 4 * 1024;
const PAGE: usize = 4096;

/// The block, page-aligned so that `trim` can find whole pages in it.
#[repr(C, align(4096))]
struct Space(UnsafeCell<[u8; SIZE]>);

// SAFETY: disjoint regions are handed out through the atomics below, so no
// two live allocations ever alias.
unsafe impl Sync for Space {}

static SPACE: Space = Space(UnsafeCell::new([0; SIZE]));

/// The shared part's state in one word, so that every change is one
/// compare-and-swap: the offset of its next free byte (low 32 bits, from
/// `KEPT` to `SIZE`) and how many of its allocations are live (high 32).
static SHARED: AtomicU64 = AtomicU64::new(KEPT as u64);
/// The furthest the shared part has reached since the last `trim`.
static HIGH: AtomicUsize = AtomicUsize::new(KEPT);
/// The offset of the kept part's next free byte.
static KEPT_TOP: AtomicUsize = AtomicUsize::new(0);
/// While set (`keeping`), allocations go to the kept part.
static KEEPING: AtomicBool = AtomicBool::new(false);

fn state(top: usize, live: u64) -> u64 {
    top as u64 | live << 32
}

fn top_of(state: u64) -> usize {
    (state & u64::from(u32::MAX)) as usize
}

fn live_of(state: u64) -> u64 {
    state >> 32
}

/// Bump allocation from the static arena, then the system allocator. A
/// handle: every value shares the one block and its counters.
pub struct StartupArena {
    _handle: (),
}

impl StartupArena {
    pub const fn new() -> StartupArena {
        StartupArena { _handle: () }
    }

    /// The block's first byte. Arena pointers are derived from this one
    /// (never made from integers), so Miri's strict provenance can check them.
    fn base() -> *mut u8 {
        SPACE.0.get().cast::<u8>()
    }

    /// The offset of `ptr` in the block, if it is an arena pointer.
    fn offset(ptr: *mut u8) -> Option<usize> {
        let at = (ptr as usize).wrapping_sub(Self::base() as usize);
        (at < SIZE).then_some(at)
    }

    /// Where `layout` would start at `top`, and where it would end.
    fn place(top: usize, layout: Layout) -> Option<(usize, usize)> {
        let base = Self::base() as usize;
        let start = (base + top).checked_next_multiple_of(layout.align())? - base;
        Some((start, start.checked_add(layout.size())?))
    }

    fn bump_shared(layout: Layout) -> Option<*mut u8> {
        let mut now = SHARED.load(Ordering::Relaxed);
        loop {
            let (start, end) = Self::place(top_of(now), layout)?;
            if end > SIZE {
                return None;
            }
            let next = state(end, live_of(now) + 1);
            match SHARED.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    HIGH.fetch_max(end, Ordering::Relaxed);
                    // `start + size <= SIZE`: in bounds of the block.
                    return Some(Self::base().wrapping_add(start));
                }
                Err(seen) => now = seen,
            }
        }
    }

    fn bump_kept(layout: Layout) -> Option<*mut u8> {
        let mut top = KEPT_TOP.load(Ordering::Relaxed);
        loop {
            let (start, end) = Self::place(top, layout)?;
            if end > KEPT {
                return None;
            }
            match KEPT_TOP.compare_exchange_weak(top, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Self::base().wrapping_add(start)),
                Err(seen) => top = seen,
            }
        }
    }

    /// Frees `[at, at + size)` of the shared part: the last block handed
    /// out gives its bytes back, and the last live one the whole part.
    fn free_shared(at: usize, size: usize) {
        let mut now = SHARED.load(Ordering::Relaxed);
        loop {
            let live = live_of(now).saturating_sub(1);
            let top = match (live, top_of(now)) {
                (0, _) => KEPT,
                (_, top) if at + size == top => at,
                (_, top) => top,
            };
            match SHARED.compare_exchange_weak(
                now,
                state(top, live),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(seen) => now = seen,
            }
        }
    }

    /// Grows or shrinks the last block handed out where it stands.
    fn resize_in_place(at: usize, old: usize, new: usize) -> bool {
        let mut now = SHARED.load(Ordering::Relaxed);
        loop {
            if top_of(now) != at + old || at + new > SIZE {
                return false;
            }
            let next = state(at + new, live_of(now));
            match SHARED.compare_exchange_weak(now, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    HIGH.fetch_max(at + new, Ordering::Relaxed);
                    return true;
                }
                Err(seen) => now = seen,
            }
        }
    }
}

impl Default for StartupArena {
    fn default() -> StartupArena {
        StartupArena::new()
    }
}

// SAFETY: arena blocks are in bounds and handed out once until freed (the
// shared part restarts only when none of its blocks is live; the kept part
// never); everything else is System's, returned to System.
unsafe impl GlobalAlloc for StartupArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let arena = if KEEPING.load(Ordering::Relaxed) {
            Self::bump_kept(layout)
        } else {
            Self::bump_shared(layout)
        };
        match arena {
            Some(ptr) => ptr,
            None => System.alloc(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match Self::offset(ptr) {
            // The kept part is never reused.
            Some(at) if at < KEPT => {}
            Some(at) => Self::free_shared(at, layout.size()),
            None => System.dealloc(ptr, layout),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(at) = Self::offset(ptr) else {
            return System.realloc(ptr, layout, new_size);
        };
        if at >= KEPT && Self::resize_in_place(at, layout.size(), new_size) {
            return ptr;
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}

/// Runs `f` with its allocations in the kept part (then the system
/// allocator), which is never reused: for what start-up keeps for the
/// whole run. Only while drainit has one thread (another's allocations
/// would be kept too).
pub fn keeping<T>(f: impl FnOnce() -> T) -> T {
    /// Ends the keeping even when `f` panics.
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            KEEPING.store(false, Ordering::Relaxed);
        }
    }
    KEEPING.store(true, Ordering::Relaxed);
    let _done = Done;
    f()
}

/// Hands the pages the shared part has dirtied back to the kernel, when
/// none of its blocks is live (it then starts again from its beginning on
/// zeroed pages); returns the bytes given back. Only while drainit has one
/// thread: the pages must stay unused while they are given back.
pub fn trim() -> usize {
    let now = SHARED.load(Ordering::Relaxed);
    if live_of(now) != 0 {
        return 0;
    }
    let base = StartupArena::base() as usize;
    // Whole pages of the block only (its neighbours share none).
    let from = (base + KEPT).next_multiple_of(PAGE);
    let to = (base + HIGH.load(Ordering::Relaxed)).next_multiple_of(PAGE);
    if to <= from {
        return 0;
    }
    #[cfg(not(miri))]
    // SAFETY: whole pages of the arena's private anonymous memory, where
    // no block is live; MADV_DONTNEED zero-fills them on the next touch.
    unsafe {
        let start = StartupArena::base().wrapping_add(from - base);
        if libc::madvise(start.cast(), to - from, libc::MADV_DONTNEED) != 0 {
            return 0;
        }
    }
    HIGH.store(KEPT, Ordering::Relaxed);
    to - from
}

#[cfg(test)]
mod tests {
    use super::*;

    // The arena is one block for the process: the tests share it, and
    // take turns.
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    fn is_arena(ptr: *mut u8) -> bool {
        StartupArena::offset(ptr).is_some()
    }

    #[test]
    fn bumps_grows_in_place_then_spills_over() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let a = arena.alloc(layout(10, 8));
            let b = arena.alloc(layout(10, 64));
            assert!(is_arena(a) && is_arena(b));
            assert_eq!(b as usize % 64, 0);
            assert!(b as usize >= a as usize + 10);
            // The last block grows where it is.
            let c = arena.realloc(b, layout(10, 64), 100);
            assert_eq!(c, b, "the last block grows in place");
            // Another does not: it moves, and its bytes come along.
            a.write_bytes(7, 10);
            let d = arena.realloc(a, layout(10, 8), 100);
            assert!(is_arena(d) && d != a);
            assert_eq!(*d.add(9), 7);
            let big = layout(SIZE, 8);
            let e = arena.alloc(big);
            assert!(!e.is_null() && !is_arena(e), "too big: from System");
            arena.dealloc(e, big);
            arena.dealloc(d, layout(100, 8));
            arena.dealloc(c, layout(100, 64));
        }
    }

    #[test]
    fn two_handles_never_hand_out_the_same_bytes() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let (one, two) = (StartupArena::new(), StartupArena::default());
        // SAFETY: test allocations with a valid layout, written in full.
        unsafe {
            let a = one.alloc(layout(32, 8));
            let b = two.alloc(layout(32, 8));
            assert!(is_arena(a) && is_arena(b));
            let (a0, b0) = (a as usize, b as usize);
            assert!(
                a0 + 32 <= b0 || b0 + 32 <= a0,
                "{a0:#x} and {b0:#x} overlap"
            );
            std::ptr::write_bytes(a, 0xaa, 32);
            std::ptr::write_bytes(b, 0xbb, 32);
            assert_eq!(*a.add(31), 0xaa, "b's writes reached a");
            one.dealloc(a, layout(32, 8));
            two.dealloc(b, layout(32, 8));
        }
    }

    #[test]
    fn what_is_kept_survives_the_restart_of_the_rest() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            // Start-up's burst, and what it makes.
            let burst: Vec<*mut u8> = (0..50).map(|_| arena.alloc(layout(600, 8))).collect();
            let made = arena.alloc(layout(48, 8));
            made.write_bytes(1, 48);
            // The copy, kept; then the burst and the original go.
            let kept = keeping(|| arena.alloc(layout(48, 8)));
            std::ptr::copy_nonoverlapping(made, kept, 48);
            assert!(StartupArena::offset(kept).is_some_and(|at| at < KEPT));
            for block in burst {
                arena.dealloc(block, layout(600, 8));
            }
            arena.dealloc(made, layout(48, 8));
            assert!(trim() >= 7 * PAGE, "the burst's pages are given back");
            // The shared part starts again, on zeroed pages; the kept copy
            // is untouched.
            let next = arena.alloc(layout(4096, 8));
            assert_eq!(StartupArena::offset(next), Some(KEPT));
            let fresh = arena.alloc(layout(4096, 8));
            if !cfg!(miri) {
                assert_eq!(*fresh.add(100), 0, "trimmed pages come back zeroed");
            }
            assert!((0..48).all(|i| *kept.add(i) == 1));
            arena.dealloc(fresh, layout(4096, 8));
            arena.dealloc(next, layout(4096, 8));
            assert_eq!(trim(), 2 * PAGE, "the two blocks' pages");
            assert_eq!(trim(), 0, "nothing dirty above the beginning");
        }
    }

    #[test]
    fn a_live_block_keeps_the_arena_from_restarting() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let live = arena.alloc(layout(64, 8));
            let gone = arena.alloc(layout(8192, 8));
            let last = arena.alloc(layout(64, 8));
            arena.dealloc(gone, layout(8192, 8));
            assert_eq!(trim(), 0, "a block is live");
            last.write_bytes(9, 64);
            live.write_bytes(3, 64);
            // The last block's bytes come back; the freed one's do not.
            arena.dealloc(last, layout(64, 8));
            let again = arena.alloc(layout(64, 8));
            assert_eq!(again, last);
            assert!((0..64).all(|i| *live.add(i) == 3));
            arena.dealloc(again, layout(64, 8));
            arena.dealloc(live, layout(64, 8));
        }
    }

    #[test]
    fn threads_get_disjoint_blocks() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let workers: Vec<_> = (0..4u8)
            .map(|n| {
                std::thread::spawn(move || {
                    let arena = StartupArena::new();
                    let mut mine = Vec::new();
                    for round in 0..200 {
                        // SAFETY: a valid layout, written in full, freed
                        // with the same layout below.
                        unsafe {
                            let p = arena.alloc(layout(24, 8));
                            p.write_bytes(n, 24);
                            mine.push(p as usize);
                            if round % 3 == 0 {
                                let q = mine.pop().unwrap() as *mut u8;
                                assert!(
                                    (0..24).all(|i| *q.add(i) == n),
                                    "another thread wrote here"
                                );
                                arena.dealloc(q, layout(24, 8));
                            }
                        }
                    }
                    for p in mine {
                        let p = p as *mut u8;
                        // SAFETY: as above.
                        unsafe {
                            assert!((0..24).all(|i| *p.add(i) == n), "another thread wrote here");
                            arena.dealloc(p, layout(24, 8));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }
}
