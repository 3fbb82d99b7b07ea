package declaration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Digests returns, for every resource ID, the digest that decides whether the
// resource changed between two applies.
//
// A file's or directory's digest is the sha256 of its canonical JSON (a
// secret's version and ciphertext hash included, never its plaintext). A
// container's digest also covers the digests of everything it reads: what it
// names under restartOn, its env-files, and file resources mounted directly.
// So a rewritten file, a rotated secret or a step that changed moves the
// digest of the container that reads it, and restarts are derived rather than
// declared (design 27, ADR 0099). A run-once step's marker is this digest
// (ADR 0052).
//
// Validate must have passed; Digests reads only earlier resources.
func (d *Declaration) Digests() map[string]string {
	out := make(map[string]string, len(d.Resources))
	filesByPath := map[string]string{}
	for _, r := range d.Resources {
		own, _ := json.Marshal(r) // a validated Resource always marshals
		h := sha256.New()
		h.Write(own)
		if c := r.Container; c != nil {
			for _, id := range c.Reads(filesByPath) {
				h.Write([]byte{0})
				h.Write([]byte(id))
				h.Write([]byte{0})
				h.Write([]byte(out[id]))
			}
		}
		out[r.ID] = hex.EncodeToString(h.Sum(nil))
		if r.File != nil {
			filesByPath[r.File.Path] = r.ID
		}
	}
	return out
}

// Reads returns the IDs of the resources a container reads, in a fixed order:
// restartOn first, then env-files, then file resources mounted directly
// (filesByPath maps an earlier file resource's path to its ID). An ID appears
// once.
func (c *Container) Reads(filesByPath map[string]string) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, id := range c.RestartOn {
		add(id)
	}
	for _, ef := range c.EnvFiles {
		add(ef.File)
	}
	for _, m := range c.Mounts {
		add(filesByPath[m.Source])
	}
	return ids
}
