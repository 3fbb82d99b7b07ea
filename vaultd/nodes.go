package vaultd

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
)

// nodeList is the mesh's node recipients, read from a file and read again
// when the file changes (an enrolled node appears without a restart).
type nodeList struct {
	path string

	mu    sync.Mutex
	mtime time.Time
	size  int64
	set   map[string]bool
}

func (n *nodeList) has(recipient string) (bool, error) {
	if err := n.refresh(); err != nil {
		return false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.set[recipient], nil
}

func (n *nodeList) refresh() error {
	fi, err := os.Stat(n.path)
	if err != nil {
		return fmt.Errorf("node list: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.set != nil && fi.ModTime().Equal(n.mtime) && fi.Size() == n.size {
		return nil
	}
	data, err := os.ReadFile(n.path)
	if err != nil {
		return fmt.Errorf("node list: %w", err)
	}
	set, err := parseNodes(data)
	if err != nil {
		return fmt.Errorf("node list %s: %w", n.path, err)
	}
	n.set, n.mtime, n.size = set, fi.ModTime(), fi.Size()
	return nil
}

// parseNodes reads one age recipient a line, optionally after a node name
// ("n1 age1..."); blank lines and # comments are skipped.
func parseNodes(data []byte) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) > 2 {
			return nil, fmt.Errorf("line %d: want \"[node] age1...\"", line)
		}
		r := f[len(f)-1]
		if _, err := age.ParseX25519Recipient(r); err != nil {
			return nil, fmt.Errorf("line %d: not an age recipient", line)
		}
		set[r] = true
	}
	return set, sc.Err()
}
