//! The start-up allocator: while the command line is read (`scratch`),
//! allocations come from a static arena by bump; everything else, before
//! and after, goes to the system allocator. Once nothing from the arena
//! is live, `release` hands its pages back to the kernel.
//!
//! Why: musl's allocator hands memory back to the kernel eagerly, so the
//! burst of short-lived allocations clap makes at start-up would cost
//! dozens of mmap/munmap calls and their TLB flushes, which made
//! `drainit -- app` start measurably slower than tini. A bump arena turns
//! them into pointer arithmetic; releasing it keeps that burst out of the
//! idle process's private memory. Only the binary installs it (see
//! `main.rs`), and `app::main` opens the window around the parse, copies
//! the configuration out of it, and releases it.
//!
//! Arena memory is never handed out twice: a block is freed by counting
//! it (`LIVE`), never by reusing its bytes, and the pages are given back
//! only when the count is zero. So whatever a window leaves live (a block
//! the parse kept somewhere), the arena simply stays: a release that
//! cannot happen is memory, never a fault.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The whole block: `.bss`, so the pages the parse never touches cost
/// nothing. clap's burst for drainit's options is about 100 KiB.
const SIZE: usize = 160 * 1024;
const PAGE: usize = 4096;

/// The block, page-aligned so that `release` can give back whole pages
/// that no neighbour shares.
#[repr(C, align(4096))]
struct Space(UnsafeCell<[u8; SIZE]>);

// SAFETY: disjoint regions are handed out through the one atomic bump
// counter, so no two blocks ever alias.
unsafe impl Sync for Space {}

static SPACE: Space = Space(UnsafeCell::new([0; SIZE]));
/// The offset of the block's next free byte.
static TOP: AtomicUsize = AtomicUsize::new(0);
/// Arena blocks handed out and not yet freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// While set (`scratch`), allocations come from the arena.
static OPEN: AtomicBool = AtomicBool::new(false);

/// Bump allocation from the static arena while a window is open, else
/// the system allocator. A handle: every value shares the one block and
/// its counters.
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

    fn bump(layout: Layout) -> Option<*mut u8> {
        // Counted live before it is taken, so that `release`, which seals
        // the block and then reads the count, never misses a block.
        LIVE.fetch_add(1, Ordering::SeqCst);
        let taken = Self::take(layout);
        if taken.is_none() {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
        taken
    }

    fn take(layout: Layout) -> Option<*mut u8> {
        let base = Self::base() as usize;
        let mut top = TOP.load(Ordering::SeqCst);
        loop {
            let start = (base + top).checked_next_multiple_of(layout.align())? - base;
            let end = start.checked_add(layout.size())?;
            if end > SIZE {
                return None;
            }
            match TOP.compare_exchange_weak(top, end, Ordering::SeqCst, Ordering::SeqCst) {
                // `start + size <= SIZE`: in bounds of the block.
                Ok(_) => return Some(Self::base().wrapping_add(start)),
                Err(seen) => top = seen,
            }
        }
    }

    /// Grows the last block handed out where it stands (a vector that
    /// grows at the end of the arena): its new bytes were never handed out.
    fn grow_in_place(at: usize, old: usize, new: usize) -> bool {
        let Some(end) = at.checked_add(new).filter(|&end| end <= SIZE) else {
            return false;
        };
        TOP.compare_exchange(at + old, end, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

impl Default for StartupArena {
    fn default() -> StartupArena {
        StartupArena::new()
    }
}

// SAFETY: arena blocks are in bounds and handed out once (their bytes are
// never reused); everything else is System's, returned to System.
unsafe impl GlobalAlloc for StartupArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let arena = if OPEN.load(Ordering::Relaxed) {
            Self::bump(layout)
        } else {
            None
        };
        match arena {
            Some(ptr) => ptr,
            None => System.alloc(layout),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let arena = if OPEN.load(Ordering::Relaxed) {
            Self::bump(layout)
        } else {
            None
        };
        match arena {
            // Zeroed static memory, never handed out before (a released
            // page comes back zero-filled too).
            Some(ptr) => ptr,
            None => System.alloc_zeroed(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::offset(ptr).is_some() {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        } else {
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(at) = Self::offset(ptr) else {
            return System.realloc(ptr, layout, new_size);
        };
        // Smaller: the block stays, its tail unused (never handed out again).
        if new_size <= layout.size()
            || (OPEN.load(Ordering::Relaxed) && Self::grow_in_place(at, layout.size(), new_size))
        {
            return ptr;
        }
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size());
            self.dealloc(ptr, layout);
        }
        new
    }
}

/// Runs `f` with its allocations (and those of any thread meanwhile) in the
/// arena, while it has room; a window inside another leaves it open.
pub fn scratch<T>(f: impl FnOnce() -> T) -> T {
    /// Puts the window back as it was, even when `f` panics.
    struct Close(bool);
    impl Drop for Close {
        fn drop(&mut self) {
            OPEN.store(self.0, Ordering::SeqCst);
        }
    }
    let _close = Close(OPEN.swap(true, Ordering::SeqCst));
    f()
}

/// What `release` did with the arena.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// Its touched pages went back to the kernel: this many bytes.
    Pages(usize),
    /// Blocks from it are still live: its pages stay.
    Live(usize),
    /// A window is open, or nothing was ever taken from it.
    Nothing,
}

/// Ends the arena: nothing is taken from it any more (a later window's
/// allocations go to the system allocator), and when none of its blocks is
/// live, the pages they touched go back to the kernel.
pub fn release() -> Released {
    if OPEN.load(Ordering::SeqCst) {
        return Released::Nothing;
    }
    // Sealed first: a block being taken now either counted itself live
    // before this, or finds no room and goes to the system allocator.
    let top = TOP.swap(SIZE, Ordering::SeqCst);
    let live = LIVE.load(Ordering::SeqCst);
    if live != 0 {
        return Released::Live(live);
    }
    let used = top.next_multiple_of(PAGE).min(SIZE);
    if used == 0 {
        return Released::Nothing;
    }
    #[cfg(not(miri))]
    // SAFETY: whole pages of the arena's private anonymous memory (the
    // block is page-aligned and a whole number of pages), where no block
    // is live; MADV_DONTNEED zero-fills them on a next touch.
    unsafe {
        if libc::madvise(StartupArena::base().cast(), used, libc::MADV_DONTNEED) != 0 {
            return Released::Nothing;
        }
    }
    Released::Pages(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The arena is one block for the process: the tests share it, and
    // take turns. (The test binary's own allocator is System's.)
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    fn is_arena(ptr: *mut u8) -> bool {
        StartupArena::offset(ptr).is_some()
    }

    /// The arena as at the process's start, for a test that ends it (only
    /// with nothing from it live: a test's blocks are all freed).
    fn fresh() {
        assert_eq!(LIVE.load(Ordering::SeqCst), 0, "a test left a block live");
        // SAFETY: no block of the arena is live, and the tests take turns.
        unsafe { StartupArena::base().write_bytes(0, SIZE) };
        TOP.store(0, Ordering::SeqCst);
    }

    #[test]
    fn only_a_window_bumps_and_a_full_arena_spills_over() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        fresh();
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let outside = arena.alloc(layout(10, 8));
            assert!(!is_arena(outside), "no window: from System");
            let (a, b, big) = scratch(|| {
                let a = arena.alloc(layout(10, 8));
                let b = arena.alloc(layout(10, 64));
                let big = arena.alloc(layout(SIZE, 8));
                (a, b, big)
            });
            assert!(is_arena(a) && is_arena(b));
            assert_eq!(b as usize % 64, 0);
            assert!(b as usize >= a as usize + 10);
            assert!(!big.is_null() && !is_arena(big), "too big: from System");
            for (ptr, l) in [
                (outside, layout(10, 8)),
                (a, layout(10, 8)),
                (b, layout(10, 64)),
                (big, layout(SIZE, 8)),
            ] {
                arena.dealloc(ptr, l);
            }
        }
    }

    #[test]
    fn the_last_block_grows_in_place_and_others_move() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        fresh();
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            scratch(|| {
                let a = arena.alloc(layout(16, 8));
                a.write_bytes(7, 16);
                let b = arena.alloc(layout(16, 8));
                let grown = arena.realloc(b, layout(16, 8), 64);
                assert_eq!(grown, b, "the last block grows where it is");
                let moved = arena.realloc(a, layout(16, 8), 64);
                assert!(is_arena(moved) && moved != a);
                assert_eq!(*moved.add(15), 7, "its bytes came along");
                assert!(
                    (16..64).all(|i| *moved.add(i) == 0),
                    "never handed out before: zero"
                );
                let shrunk = arena.realloc(moved, layout(64, 8), 8);
                assert_eq!(shrunk, moved, "a smaller block stays");
                arena.dealloc(shrunk, layout(8, 8));
                arena.dealloc(grown, layout(64, 8));
            });
        }
    }

    #[test]
    fn a_live_block_keeps_the_pages_and_the_arena_ends_anyway() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        fresh();
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let (burst, kept) = scratch(|| {
                let burst: Vec<*mut u8> = (0..50).map(|_| arena.alloc(layout(600, 8))).collect();
                (burst, arena.alloc(layout(48, 8)))
            });
            assert!(is_arena(kept));
            kept.write_bytes(1, 48);
            for block in burst {
                block.write_bytes(9, 600);
                arena.dealloc(block, layout(600, 8));
            }
            assert_eq!(release(), Released::Live(1));
            assert!((0..48).all(|i| *kept.add(i) == 1), "a live block is kept");
            // Ended all the same: a later window takes nothing from it.
            let later = scratch(|| arena.alloc(layout(8, 8)));
            assert!(!is_arena(later));
            arena.dealloc(later, layout(8, 8));
            arena.dealloc(kept, layout(48, 8));
        }
    }

    #[test]
    fn with_nothing_live_the_pages_go_back() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        fresh();
        let arena = StartupArena::new();
        // SAFETY: test allocations with valid layouts, freed with the same.
        unsafe {
            let burst: Vec<*mut u8> = scratch(|| {
                (0..50)
                    .map(|_| {
                        let block = arena.alloc(layout(600, 8));
                        block.write_bytes(9, 600);
                        block
                    })
                    .collect()
            });
            let first = burst[0];
            for block in burst {
                arena.dealloc(block, layout(600, 8));
            }
            assert_eq!(scratch(release), Released::Nothing, "not inside a window");
            let Released::Pages(given) = release() else {
                panic!("nothing live, yet the pages stay");
            };
            assert!(given >= 7 * PAGE, "the burst's pages: {given}");
            if !cfg!(miri) {
                assert_eq!(*first, 0, "given back: zero-filled");
            }
        }
    }

    #[test]
    fn threads_get_disjoint_blocks() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        fresh();
        scratch(|| {
            let workers: Vec<_> = (0..4u8)
                .map(|n| {
                    std::thread::spawn(move || {
                        let arena = StartupArena::new();
                        let mut mine = Vec::new();
                        for _ in 0..100 {
                            // SAFETY: a valid layout, written in full, freed
                            // with the same layout below.
                            unsafe {
                                let p = arena.alloc(layout(24, 8));
                                p.write_bytes(n, 24);
                                mine.push(p as usize);
                            }
                        }
                        for p in mine {
                            let p = p as *mut u8;
                            // SAFETY: as above.
                            unsafe {
                                assert!((0..24).all(|i| *p.add(i) == n), "another wrote here");
                                arena.dealloc(p, layout(24, 8));
                            }
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
        });
    }
}
