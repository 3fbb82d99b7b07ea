package hostd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/meshgen/meshgen/hostd/declaration"
)

// The files of the state directory. Each is replaced atomically (temp file,
// fsync, rename), so a crash at any point leaves the old or the new version.
const (
	stateFile  = "state.json"
	targetFile = "target.json"
	reportFile = "report.json"
	// refusedFile keeps the branch content last refused (ciphertext only),
	// so a poll that finds it again can say why without fetching it.
	refusedFile = "refused.json"
)

// state is hostd's record of what it applied (ADR 0018: recorded after it
// works).
type state struct {
	// Fetched is the last commit of node/<name> that was fetched and verified
	// (adopted or refused); a poll finding it again has nothing new.
	Fetched string `json:"fetched,omitempty"`
	// Refused says why the commit Fetched was refused, if it was.
	Refused string `json:"refused,omitempty"`
	// Generation is the generation last applied in full.
	Generation uint64 `json:"generation"`
	// Applied maps a resource ID to the digest it was last applied with.
	Applied map[string]string `json:"applied"`
	// Markers maps a run-once step's ID to the digest it last ran to
	// completion with (ADR 0052); only ever written after exit 0.
	Markers map[string]string `json:"markers"`
	// Containers maps a container's name to the ID hostd made it with. A
	// container's image, env, mounts and ports cannot change without a new
	// ID, so only one with another ID (made outside hostd) is inspected.
	Containers map[string]string `json:"containers"`
	// SecretFiles maps the path of every file hostd wrote from a sealed
	// secret (not create-once) to the ID of the resource that declared it.
	// A path is entered before the secret is written and leaves only after
	// the file was removed, or another file took the path: these, and nothing
	// else on disk, are what hostd removes once no longer declared (remove.go).
	SecretFiles map[string]string `json:"secretFiles,omitempty"`
}

// target is the newest declaration that verified: what hostd converges to.
// It keeps the branch content (ciphertext only) so a poll with nothing new,
// or an apply after a crash, needs no network.
type target struct {
	Branch     Branch `json:"branch"`
	Generation uint64 `json:"generation"`
	SHA256     string `json:"sha256"`
}

func (h *Host) statePath(name string) string { return filepath.Join(h.cfg.StateDir, name) }

func (h *Host) loadState() (*state, error) {
	st := &state{}
	if err := readJSON(h.statePath(stateFile), st); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if st.Applied == nil {
		st.Applied = map[string]string{}
	}
	if st.Markers == nil {
		st.Markers = map[string]string{}
	}
	if st.Containers == nil {
		st.Containers = map[string]string{}
	}
	if st.SecretFiles == nil {
		st.SecretFiles = map[string]string{}
	}
	return st, nil
}

func (h *Host) saveState(st *state) error { return writeJSON(h.statePath(stateFile), st) }

func (h *Host) loadTarget() (*target, error) {
	var t target
	if err := readJSON(h.statePath(targetFile), &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// adopt verifies br and, when it is newer than the target, makes it the
// target. A refusal leaves the target as it was.
func (h *Host) adopt(br Branch) (*declaration.Declaration, error) {
	d, last, err := h.check(br)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(br.Declaration)
	t := target{Branch: br, Generation: d.Generation, SHA256: hex.EncodeToString(sum[:])}
	if t.SHA256 == last.SHA256 {
		return d, nil // the same declaration at another commit: nothing to adopt
	}
	if err := writeJSON(h.statePath(targetFile), &t); err != nil {
		return nil, err
	}
	return d, nil
}

// check verifies br against the current target.
func (h *Host) check(br Branch) (*declaration.Declaration, Last, error) {
	var last Last
	if t, err := h.loadTarget(); err == nil {
		last = Last{Generation: t.Generation, SHA256: t.SHA256}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, last, err
	}
	d, err := Verify(h.pub, h.cfg.Node, h.cfg.Mesh, h.roots, last, br)
	return d, last, err
}

// Adopt verifies a branch's content and makes it the declaration hostd
// converges to, as a fetch would; [Host.ApplyTarget] then applies it. It
// returns a [*Refusal] when the content cannot be trusted.
func (h *Host) Adopt(br Branch) error {
	_, err := h.adopt(br)
	return err
}

// Status returns the last report hostd wrote, applied or refused.
func (h *Host) Status() (declaration.Report, error) {
	var rep declaration.Report
	if err := readJSON(h.statePath(reportFile), &rep); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rep, fmt.Errorf("no report yet: hostd has not applied anything (run `hostd apply --once`): %w", err)
		}
		return rep, err
	}
	return rep, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w (remove it to start over)", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	if err := renameio.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("record %s: %w", filepath.Base(path), err)
	}
	return nil
}
