package branch

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// PackLimit is how many packfiles a repository may gather before
// [Repository.Maintain] repacks it: every write that commits adds one, and
// every read loads every pack's index.
const PackLimit = 50

// Maintain repacks the repository (the local one, or a remote's cache) into
// one packfile once it holds more than [PackLimit], with `git gc --auto`,
// in the foreground. Writers racing it are safe: git keeps unreachable
// objects (a pack written whose ref is not moved yet) for its prune grace
// period, removes a replaced pack only after the new one is in place, and a
// write that finds a pack gone reads again. It reports whether it
// repacked.
func (r *Repository) Maintain(ctx context.Context) (bool, error) {
	dir := r.b.dir()
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
	if err != nil || len(packs) <= PackLimit {
		return false, err
	}
	cmd := exec.CommandContext(ctx, "git", "-c", fmt.Sprintf("gc.autoPackLimit=%d", PackLimit), "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("repack %s (%d packfiles): git gc: %w: %s", dir, len(packs), err, out)
	}
	return true, nil
}
