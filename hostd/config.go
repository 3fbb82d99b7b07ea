package hostd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is hostd's local configuration, read from a YAML (or JSON) file by
// [LoadConfig]. It is the node's own: nothing in it comes from the mesh
// repository. An example:
//
//	node: n1
//	mesh: demo
//	remote: https://git.example.org/mesh.git   # fetch node/n1 from here
//	pushURL: ssh://git@git.example.org/mesh.git # push status/n1 here (optional)
//	sshKey: /etc/hostd/ssh_key                   # for ssh:// URLs (optional)
//	knownHosts: /etc/hostd/known_hosts           # the git server's ssh key
//	publicKey: /etc/hostd/reconciler.pub         # installed at enrolment
//	identity: /etc/hostd/age-identity.txt        # made by `hostd init`
//	stateDir: /var/lib/hostd
//	root: /srv/mesh                              # hostd writes only here...
//	extraRoots: [/etc/mesh]                      # ...and here
//	podman: {root: "", runRoot: "", tmpDir: "", stopTimeout: 10}
//	allowPulls: false
//	interval: 1m
//	textfile: /var/lib/node_exporter/hostd.prom  # Prometheus textfile (optional)
type Config struct {
	// Node is this node's name; only branch node/<Node> is fetched.
	Node string `yaml:"node" json:"node"`
	// Mesh is the mesh this node belongs to; a declaration for another is refused.
	Mesh string `yaml:"mesh" json:"mesh"`
	// Remote is the mesh repository URL (file://, git://, http(s)://, ssh://).
	Remote string `yaml:"remote" json:"remote"`
	// PushURL, when set, is where the report is pushed to branch status/<Node>.
	PushURL string `yaml:"pushURL,omitempty" json:"pushURL,omitempty"`
	// SSHKey is a private key file for ssh:// remotes; the ssh agent otherwise.
	SSHKey string `yaml:"sshKey,omitempty" json:"sshKey,omitempty"`
	// KnownHosts is the known_hosts file the ssh server's key is checked
	// against; $SSH_KNOWN_HOSTS or ~/.ssh/known_hosts when empty.
	KnownHosts string `yaml:"knownHosts,omitempty" json:"knownHosts,omitempty"`
	// PublicKey is the PEM public key declarations must be signed with,
	// installed at enrolment; never read from the repository.
	PublicKey string `yaml:"publicKey" json:"publicKey"`
	// Identity is the age identity file made by `hostd init`.
	Identity string `yaml:"identity" json:"identity"`
	// StateDir holds hostd's records, its git cache and its last report.
	StateDir string `yaml:"stateDir" json:"stateDir"`
	// Root is the node root: every path a declaration names must be under it
	// or under one of ExtraRoots.
	Root string `yaml:"root" json:"root"`
	// ExtraRoots are further directories declarations may write under.
	ExtraRoots []string `yaml:"extraRoots,omitempty" json:"extraRoots,omitempty"`
	// Podman selects the podman store.
	Podman PodmanConfig `yaml:"podman,omitempty" json:"podman,omitempty"`
	// AllowPulls lets podman pull a missing image; otherwise --pull=never.
	AllowPulls bool `yaml:"allowPulls,omitempty" json:"allowPulls,omitempty"`
	// Interval is the poll interval of `hostd run` (default 1m); each wait is
	// jittered by up to a tenth.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// Textfile, when set, is where a Prometheus textfile of outcomes is written.
	Textfile string `yaml:"textfile,omitempty" json:"textfile,omitempty"`

	// Runtime replaces podman (tests); not read from the file.
	Runtime Runtime `yaml:"-" json:"-"`
}

// PodmanConfig is podman's store and stop timeout.
type PodmanConfig struct {
	Binary  string `yaml:"binary,omitempty" json:"binary,omitempty"`
	Root    string `yaml:"root,omitempty" json:"root,omitempty"`
	RunRoot string `yaml:"runRoot,omitempty" json:"runRoot,omitempty"`
	TmpDir  string `yaml:"tmpDir,omitempty" json:"tmpDir,omitempty"`
	// StopTimeout is seconds given to a container to stop; 10 when nil.
	StopTimeout *int `yaml:"stopTimeout,omitempty" json:"stopTimeout,omitempty"`
}

// StopTimeoutSeconds is StopTimeout or its default, 10.
func (p PodmanConfig) StopTimeoutSeconds() int {
	if p.StopTimeout == nil {
		return 10
	}
	return *p.StopTimeout
}

// Duration is a time.Duration written as "30s" or "1m".
type Duration time.Duration

// UnmarshalText reads a duration such as "30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as "1m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// LoadConfig reads a hostd configuration file. Unknown fields are refused.
// Relative paths in it (keys, state, roots, textfile) are taken from the
// file's own directory.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read hostd config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		return Config{}, fmt.Errorf("hostd config %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return Config{}, fmt.Errorf("hostd config %s: %w", path, err)
	}
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	for _, p := range []*string{&c.PublicKey, &c.Identity, &c.SSHKey, &c.KnownHosts, &c.StateDir, &c.Root, &c.Textfile} {
		abs(p)
	}
	for i := range c.ExtraRoots {
		abs(&c.ExtraRoots[i])
	}
	return c, c.check()
}

func (c *Config) check() error {
	var errs []error
	need := func(v, name string) {
		if v == "" {
			errs = append(errs, fmt.Errorf("hostd config: %s is not set", name))
		}
	}
	need(c.Node, "node")
	need(c.Mesh, "mesh")
	need(c.Remote, "remote")
	need(c.PublicKey, "publicKey")
	need(c.Identity, "identity")
	need(c.StateDir, "stateDir")
	need(c.Root, "root")
	for _, r := range append([]string{c.Root}, c.ExtraRoots...) {
		if r != "" && (!filepath.IsAbs(r) || r == "/") {
			errs = append(errs, fmt.Errorf("hostd config: root %q must be an absolute directory other than /", r))
		}
	}
	if c.Interval == 0 {
		c.Interval = Duration(time.Minute)
	}
	return errors.Join(errs...)
}
