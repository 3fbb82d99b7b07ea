package schema

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// The paths of a mesh repository (DESIGN.md).
const (
	MeshFile       = "mesh.yaml"
	NodesDir       = "nodes"
	ContractsDir   = "catalog/contracts"
	ModulesDir     = "catalog/modules"
	ModuleFile     = "module.yaml"
	AssignmentsDir = "assignments"
)

// Load reads and checks the mesh repository rooted at fsys. When the
// repository holds any mistake it returns a nil Repo and a [Problems]
// naming every one of them, sorted by file, line and column; any other
// error is a failure to read fsys.
func Load(fsys fs.FS) (*Repo, error) {
	l := &loader{fsys: fsys, repo: &Repo{
		Nodes:     map[string]*Node{},
		Contracts: map[string]*Contract{},
		Modules:   map[string]*Module{},
	}}
	if err := l.read(); err != nil {
		return nil, err
	}
	l.validate()
	if len(l.probs.list) > 0 {
		l.probs.list.Sort()
		return nil, l.probs.list
	}
	return l.repo, nil
}

// LoadDir reads and checks the mesh repository in directory dir, as [Load].
func LoadDir(dir string) (*Repo, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("read mesh repository: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("read mesh repository %s: not a directory", dir)
	}
	return Load(os.DirFS(dir))
}

// loader holds what is being read.
type loader struct {
	fsys  fs.FS
	repo  *Repo
	probs problems
	// refused holds, by file, the fields the decoder refused.
	refused map[string]map[string]bool
}

// readFile reads one file, returning false (with nothing recorded) when it
// does not exist. A directory in its place is reported and reads as empty.
func (l *loader) readFile(name string) ([]byte, bool, error) {
	if st, err := fs.Stat(l.fsys, name); err == nil && st.IsDir() {
		// Reported once; the file's other checks are then skipped.
		l.probs.add(Pos{File: name}, "", "make "+name+" a file", "this is a directory; want a file")
		return nil, true, nil
	}
	data, err := fs.ReadFile(l.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", name, err)
	}
	return data, true, nil
}

// readDir lists a directory, empty when it does not exist; a file where the
// directory should be is a problem.
func (l *loader) readDir(name string) ([]fs.DirEntry, error) {
	st, err := fs.Stat(l.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if !st.IsDir() {
		l.probs.add(Pos{File: name}, "", "remove the file: "+name+" is a directory of the mesh repository", "this is a file; want a directory")
		return nil, nil
	}
	ents, err := fs.ReadDir(l.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return ents, nil
}

// yamlFiles lists the *.yaml files of dir by name without the extension,
// refusing *.yml files and directories where files are expected.
func (l *loader) yamlFiles(dir string) ([]string, error) {
	ents, err := l.readDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "."):
		case e.IsDir():
			l.probs.add(Pos{File: p}, "", "move its files out, or remove it", "unexpected directory")
		case strings.HasSuffix(e.Name(), ".yaml"):
			names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
		case strings.HasSuffix(e.Name(), ".yml"):
			l.probs.add(Pos{File: p}, "", "rename it to "+strings.TrimSuffix(e.Name(), ".yml")+".yaml", "ignored: the extension must be .yaml")
		}
	}
	return names, nil
}

// read reads every file of the repository into the model.
func (l *loader) read() error {
	data, ok, err := l.readFile(MeshFile)
	if err != nil {
		return err
	}
	if !ok {
		l.probs.add(Pos{File: MeshFile}, "", "create mesh.yaml with at least `name: <mesh>`", "missing: this is not a mesh repository")
	} else {
		l.repo.Mesh.FieldPos, _ = decodeFile(MeshFile, data, &l.repo.Mesh, &l.probs)
		l.repo.Mesh.Pos = l.repo.Mesh.FieldPos["$"]
	}

	nodes, err := l.yamlFiles(NodesDir)
	if err != nil {
		return err
	}
	for _, name := range nodes {
		file := path.Join(NodesDir, name+".yaml")
		data, _, err := l.readFile(file)
		if err != nil {
			return err
		}
		n := &Node{}
		n.FieldPos, _ = decodeFile(file, data, n, &l.probs)
		n.Name, n.Pos = name, n.FieldPos["$"]
		l.repo.Nodes[name] = n
	}

	contracts, err := l.yamlFiles(ContractsDir)
	if err != nil {
		return err
	}
	for _, name := range contracts {
		file := path.Join(ContractsDir, name+".yaml")
		data, _, err := l.readFile(file)
		if err != nil {
			return err
		}
		c := &Contract{}
		c.FieldPos, _ = decodeFile(file, data, c, &l.probs)
		c.Name, c.Pos = name, c.FieldPos["$"]
		for k, f := range c.Fields {
			f.Pos = c.FieldPos["$.fields."+k]
			c.Fields[k] = f
		}
		l.repo.Contracts[name] = c
	}

	mods, err := l.readDir(ModulesDir)
	if err != nil {
		return err
	}
	for _, e := range mods {
		p := path.Join(ModulesDir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if !e.IsDir() {
			l.probs.add(Pos{File: p}, "", "put it in "+p+"/"+ModuleFile+" inside a directory named for the module", "a module is a directory holding %s", ModuleFile)
			continue
		}
		file := path.Join(p, ModuleFile)
		data, ok, err := l.readFile(file)
		if err != nil {
			return err
		}
		if !ok {
			l.probs.add(Pos{File: p}, "", "add "+file+", or remove the directory", "the module directory holds no %s", ModuleFile)
			continue
		}
		m := &Module{}
		m.FieldPos, _ = decodeFile(file, data, m, &l.probs)
		m.Name, m.Pos = e.Name(), m.FieldPos["$"]
		l.repo.Modules[m.Name] = m
	}

	nodeDirs, err := l.readDir(AssignmentsDir)
	if err != nil {
		return err
	}
	for _, nd := range nodeDirs {
		p := path.Join(AssignmentsDir, nd.Name())
		if strings.HasPrefix(nd.Name(), ".") {
			continue
		}
		if !nd.IsDir() {
			l.probs.add(Pos{File: p}, "", "put assignments in "+AssignmentsDir+"/<node>/<module>.yaml", "an assignment belongs in a directory named for its node")
			continue
		}
		names, err := l.yamlFiles(p)
		if err != nil {
			return err
		}
		for _, mod := range names {
			file := path.Join(p, mod+".yaml")
			data, _, err := l.readFile(file)
			if err != nil {
				return err
			}
			a := &Assignment{}
			a.FieldPos, _ = decodeFile(file, data, a, &l.probs)
			a.Node, a.Module, a.Pos = nd.Name(), mod, a.FieldPos["$"]
			l.repo.Assignments = append(l.repo.Assignments, a)
		}
	}
	slices.SortFunc(l.repo.Assignments, func(a, b *Assignment) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Module, b.Module)
	})
	return nil
}
