package synth

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/goccy/go-yaml"

	schema "github.com/meshgen/meshgen/catalog-schema"
)

// Recipient is the age recipient every synthetic node is written with: a
// valid one, whose identity nobody holds.
const Recipient = "age1t0qsk0cutnqjzdwep0vx2va0q4d04dgwmtpfnrealkcmlccmh36q686dd8"

// WriteDir writes the synthetic mesh m as a mesh repository in dir, which
// must not exist yet: catalog/contracts is copied from the catalog
// repository at catalogDir, every module (copies included) is
// written from the catalog's module file, and nodes/ and assignments/ are
// written from m, as is mesh.yaml. Reading dir with schema.LoadDir gives m's repository back.
func WriteDir(m *Result, catalogDir, dir string) error {
	copyFile := func(rel, to string) error {
		data, err := os.ReadFile(filepath.Join(catalogDir, rel))
		if err != nil {
			return err
		}
		return write(filepath.Join(dir, to), data)
	}
	mesh, err := yaml.Marshal(schema.Mesh{Name: m.Repo.Mesh.Name, Defaults: m.Repo.Mesh.Defaults})
	if err != nil {
		return fmt.Errorf("synth: mesh.yaml: %w", err)
	}
	if err := write(filepath.Join(dir, "mesh.yaml"), mesh); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	contracts := filepath.Join(catalogDir, "catalog", "contracts")
	err = filepath.WalkDir(contracts, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(catalogDir, p)
		return copyFile(rel, rel)
	})
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("synth: copy contracts: %w", err)
	}
	for name, mod := range m.Repo.Modules {
		if err := copyFile(filepath.Join("catalog", "modules", mod.Name, "module.yaml"), filepath.Join("catalog", "modules", name, "module.yaml")); err != nil {
			return fmt.Errorf("synth: module %s: %w", name, err)
		}
	}
	for name, n := range m.Repo.Nodes {
		data, err := yaml.Marshal(schema.Node{Recipient: Recipient, Root: n.Root, Facts: n.Facts})
		if err != nil {
			return fmt.Errorf("synth: node %s: %w", name, err)
		}
		if err := write(filepath.Join(dir, "nodes", name+".yaml"), data); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	for _, a := range m.Repo.Assignments {
		data, err := yaml.Marshal(a)
		if err != nil {
			return fmt.Errorf("synth: assignment %s: %w", a.ID(), err)
		}
		if string(data) == "{}\n" {
			data = nil
		}
		if err := write(filepath.Join(dir, "assignments", a.Node, a.Module+".yaml"), data); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

func write(file string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}
