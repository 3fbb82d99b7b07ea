package vaultd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshgen/meshgen/vaultd/internal/store"
)

// TestGenerationWaitsForWritesItCounts: a token is answered only once every
// write that took a counter up to it ended, whatever order they end in.
func TestGenerationWaitsForWritesItCounts(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "vault"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := openGeneration(st)
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.begin()
	if err != nil {
		t.Fatal(err)
	}
	second, err := g.begin()
	if err != nil {
		t.Fatal(err)
	}
	g.end(second) // the later write ends first
	got := make(chan uint64, 1)
	go func() { got <- g.current().Counter }()
	select {
	case c := <-got:
		t.Fatalf("token %d answered while the write that took %d is still running", c, first)
	default:
	}
	g.end(first)
	if c := <-got; c != second {
		t.Fatalf("token %d, want %d", c, second)
	}
}

// TestGenerationNeverGoesBack: a vault opened again after a crash (no
// close) starts at or above every counter taken before, and one closed
// cleanly starts at the same counter; every counter taken is under a
// ceiling already on disk.
func TestGenerationNeverGoesBack(t *testing.T) {
	// Blocks of generationBlock counters behave as these, only longer.
	const testBlock = 64
	for _, tt := range []struct {
		name   string
		writes int
		close  bool
	}{
		{"no write, crash", 0, false},
		{"one write, crash", 1, false},
		{"a block of writes, crash", testBlock, false},
		{"over a block, crash", testBlock + 3, false},
		{"one write, clean close", 1, true},
		{"over a block, clean close", testBlock + 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := store.Open(filepath.Join(t.TempDir(), "vault"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			g, err := openGeneration(st)
			if err != nil {
				t.Fatal(err)
			}
			g.block = testBlock
			var last uint64
			for range tt.writes {
				n, err := g.begin()
				if err != nil {
					t.Fatal(err)
				}
				if n <= last {
					t.Fatalf("counter %d after %d", n, last)
				}
				// What is on disk already covers n: a crash now cannot
				// bring the counter under it.
				if again, err := openGeneration(st); err != nil || again.counter < n {
					t.Fatalf("on disk during write %d: %+v, %v", n, again, err)
				}
				g.end(n)
				last = n
			}
			if tt.close {
				if err := g.close(); err != nil {
					t.Fatal(err)
				}
			}
			again, err := openGeneration(st)
			if err != nil {
				t.Fatal(err)
			}
			if again.epoch != g.epoch || again.counter < last || tt.close && again.counter != last {
				t.Fatalf("opened again at %s:%d after %s:%d (clean close %v)", again.epoch, again.counter, g.epoch, last, tt.close)
			}
		})
	}
}

// TestGenerationDamagedFile: a damaged generation file is refused, saying
// how to repair it, never replaced silently.
func TestGenerationDamagedFile(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "vault"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.WriteFile(generationFile, []byte("not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := openGeneration(st); err == nil || !strings.Contains(err.Error(), "is damaged: delete it") {
		t.Fatalf("a damaged generation file: %v", err)
	}
}
