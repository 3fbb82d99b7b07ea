package schema

import (
	"testing"
	"time"
)

// TestMemFS checks the in-memory file system RefFS reads a tree into against
// the standard library's conformance test.
func TestMemFS(t *testing.T) {
	m := newMemFS(time.Unix(1, 0))
	for _, f := range []string{"mesh.yaml", "nodes/n1.yaml", "nodes/n2.yaml", "catalog/modules/a/module.yaml", "assignments/n1/a.yaml"} {
		m.add(f, []byte("x: "+f+"\n"))
	}
	if err := fstestFS(m, "mesh.yaml", "nodes/n2.yaml", "catalog/modules/a/module.yaml", "assignments/n1/a.yaml"); err != nil {
		t.Fatal(err)
	}
}
