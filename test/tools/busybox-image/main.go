// Command busybox-image writes the demo's container image: the deterministic
// busybox OCI archive internal/ocitest builds, named meshgen-busybox, and
// prints the digest-pinned reference the demo's modules use.
//
//	go run ./test/tools/busybox-image -o DIR
//	podman load -i DIR/meshgen-busybox.oci.tar
//	podman run --pull=never localhost/meshgen-busybox@sha256:<digest> ...
//
// The archive is byte-identical on every run, so its digest is fixed (for a
// given /bin/busybox) and examples/demo pins it; this package's test fails
// when the two drift. It is a tool for the demo and the tests, not a product
// binary.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/meshgen/meshgen/internal/ocitest"
)

// Name is the image's name: loaded, it is localhost/meshgen-busybox.
const Name = "meshgen-busybox"

// Reference returns the digest-pinned reference of the image ocitest builds,
// "localhost/meshgen-busybox@sha256:<hex>".
func Reference() (string, error) {
	_, digest, err := ocitest.Archive(Name)
	if err != nil {
		return "", err
	}
	return "localhost/" + Name + "@" + digest, nil
}

func run() error {
	out := flag.String("o", "", "directory to write "+Name+".oci.tar into (without it, only the reference is printed)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: the only flag is -o DIR", flag.Args())
	}
	if *out == "" {
		ref, err := Reference()
		if err != nil {
			return err
		}
		fmt.Println(ref)
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("make output directory: %w", err)
	}
	path, digest, err := ocitest.Build(*out, Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	fmt.Println("localhost/" + Name + "@" + digest)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "busybox-image: %v\n", err)
		os.Exit(1)
	}
}
