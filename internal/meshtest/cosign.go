package meshtest

import (
	"os"
	"path/filepath"
	"testing"
)

// CosignCLI returns the path of the real cosign CLI: $MESHGEN_COSIGN (as
// `make test` sets it), else $HOME/.cache/meshgen/bin/cosign. A test that
// needs it skips, saying how to build it, when it is absent outside `make
// test`.
func CosignCLI(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MESHGEN_COSIGN"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "meshgen", "bin", "cosign")
	if _, err := os.Stat(p); err != nil {
		t.Skip("the cosign CLI is not built: run `make cosign` or set MESHGEN_COSIGN")
	}
	return p
}
