package hostd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// Lock takes hostd's exclusive lock on its state directory, so a timer's
// `hostd apply --once` and a running `hostd run` never apply at once. The
// returned function releases it; the kernel releases it if hostd dies.
func (h *Host) Lock() (unlock func(), err error) {
	f, err := os.OpenFile(h.statePath("lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take state lock: %w", err)
	}
	return func() { f.Close() }, nil
}

// RunOptions tune [Host.Run].
type RunOptions struct {
	// OnReport is called after each poll with its report and error.
	OnReport func(declaration.Report, error)
	// MaxBackoff bounds the wait after failures; 8 intervals when zero.
	MaxBackoff time.Duration
}

// Run polls and applies every interval, jittered by up to a tenth so a
// fleet does not poll in step, until ctx ends. After a failure (the remote
// cannot be reached, a step failed) the wait doubles up to MaxBackoff; the last good declaration is
// kept and applied meanwhile (drift is still corrected).
func (h *Host) Run(ctx context.Context, opts RunOptions) error {
	interval := time.Duration(h.cfg.Interval)
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 8 * interval
	}
	wait := interval
	for {
		rep, err := h.locked(ctx)
		if opts.OnReport != nil {
			opts.OnReport(rep, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		wait = nextWait(wait, interval, opts.MaxBackoff, err)
		if err != nil && !reachable(err) {
			// The remote is down: keep the machine at its last good state.
			if rep, aerr := h.applyLocked(ctx); aerr != nil && opts.OnReport != nil {
				opts.OnReport(rep, aerr)
			}
		}
		jitter := time.Duration(rand.Int64N(int64(wait)/10 + 1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait + jitter):
		}
	}
}

func (h *Host) locked(ctx context.Context) (declaration.Report, error) {
	unlock, err := h.Lock()
	if err != nil {
		return declaration.Report{}, err
	}
	defer unlock()
	return h.Once(ctx)
}

func (h *Host) applyLocked(ctx context.Context) (declaration.Report, error) {
	unlock, err := h.Lock()
	if err != nil {
		return declaration.Report{}, err
	}
	defer unlock()
	return h.ApplyTarget(ctx)
}

// OnceLocked is [Host.Once] under the state lock.
func (h *Host) OnceLocked(ctx context.Context) (declaration.Report, error) { return h.locked(ctx) }

// nextWait is the wait before the next poll: the interval after a poll that
// worked or refused (the remote answered), else double the last wait, up to
// max.
func nextWait(last, interval, max time.Duration, err error) time.Duration {
	var refusal *Refusal
	if err == nil || errors.As(err, &refusal) {
		return interval
	}
	return min(2*last, max)
}

// reachable reports whether an error of Once came after the remote answered.
func reachable(err error) bool {
	var fe *fetchError
	return !errors.As(err, &fe)
}
