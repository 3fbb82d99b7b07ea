package genesis_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/meshgen/meshgen/genesis"
)

// Make a mesh in a new directory; with a Vault in the options it would also
// deliver the first enrolment token (see the package doc).
func ExampleMake() {
	dir, err := os.MkdirTemp("", "genesis-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	res, err := genesis.Make(context.Background(), genesis.Options{
		Home:     filepath.Join(dir, "mesh"),
		Name:     "home",
		Password: []byte("from COSIGN_PASSWORD or a password file"),
	})
	if err != nil {
		panic(err)
	}
	files, err := exec.Command("git", "-C", res.Repo, "ls-tree", "-r", "--name-only", "main").Output()
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s", files)
	fmt.Println(filepath.Base(res.Key), "delivered:", len(res.Delivered))
	// Output:
	// README.md
	// assignments/.gitkeep
	// catalog/contracts/.gitkeep
	// catalog/modules/.gitkeep
	// keys/reconciler.pub
	// mesh.yaml
	// nodes/.gitkeep
	// reconciler.key delivered: 0
}
