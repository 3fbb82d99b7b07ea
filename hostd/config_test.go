package hostd

import (
	"strings"
	"testing"
	"time"
)

// The example configuration shipped with the systemd units loads.
func TestLoadConfigExample(t *testing.T) {
	c, err := LoadConfig("../examples/systemd/hostd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != "n1" || c.Mesh != "demo" || c.Root != "/srv/mesh" || time.Duration(c.Interval) != time.Minute ||
		c.Podman.StopTimeoutSeconds() != 10 || c.PushURL == "" || c.Textfile == "" {
		t.Fatalf("loaded %+v", c)
	}
}

func TestLoadConfigRefuses(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"unknown field", "node: n1\nmesh: m\nremote: file:///x\npublicKey: k\nidentity: i\nstateDir: s\nroot: /srv\nrots: [/]\n", "unknown field"},
		{"missing fields", "node: n1\n", "remote is not set"},
		{"root is /", "node: n1\nmesh: m\nremote: file:///x\npublicKey: k\nidentity: i\nstateDir: s\nroot: /\n", `root "/" must be an absolute directory other than /`},
		{"bad interval", "node: n1\nmesh: m\nremote: file:///x\npublicKey: k\nidentity: i\nstateDir: s\nroot: /srv\ninterval: soon\n", "duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := t.TempDir() + "/hostd.yaml"
			writeTestFile(t, p, tc.file)
			_, err := LoadConfig(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Relative paths are taken from the configuration file's directory.
func TestLoadConfigRelativePaths(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, dir+"/hostd.yaml", "node: n1\nmesh: m\nremote: file:///x\npublicKey: keys/r.pub\nidentity: keys/id\nstateDir: state\nroot: root\nextraRoots: [more]\n")
	c, err := LoadConfig(dir + "/hostd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicKey != dir+"/keys/r.pub" || c.StateDir != dir+"/state" || c.Root != dir+"/root" || c.ExtraRoots[0] != dir+"/more" {
		t.Fatalf("loaded %+v", c)
	}
}
