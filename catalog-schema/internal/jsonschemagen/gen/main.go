// Command gen writes the JSON Schema files of catalog-schema/jsonschema from
// the model's Go types. Run it with `go generate ./catalog-schema/`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/meshgen/meshgen/catalog-schema/internal/jsonschemagen"
)

func main() {
	src := flag.String("src", ".", "the directory of package schema (catalog-schema)")
	out := flag.String("out", "jsonschema", "where to write the schema files")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	files, err := jsonschemagen.Generate(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(out, n), files[n], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", n, err)
		}
	}
	return nil
}
