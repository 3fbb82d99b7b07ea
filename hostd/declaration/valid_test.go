package declaration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// checks pairs each hand-written check with the regular expression it
// replaces.
var checks = []struct {
	name  string
	check func(string) bool
	re    *regexp.Regexp
}{
	{"isDigestImage", isDigestImage, digestImage},
	{"isOctalMode", isOctalMode, octalMode},
	{"isOwner", isOwner, ownerForm},
	{"isHex64", isHex64, hexSHA256},
	{"isEnvName", isEnvName, envName},
	{"isSealedPath", isSealedPath, sealedPath},
	{"isContainerName", isContainerName, containerName},
}

const hex64 = "6a9bf81bfdcd3da0e25dd1a8151adbd15b07fdacbd195321ed4549b434fe12e1"

// checkSeeds are strings near each check's edges: both sides of every
// class, lengths one off, the anchors (a trailing newline), invalid UTF-8.
var checkSeeds = []string{
	"", "0", "0640", "0644\n", "0800", "064", "06400", "1644", "0o64", "\xff644",
	"1:2", "0:0", "1000:1000", ":1", "1:", "1:2:3", "a:b", "1 :2", "١:٢",
	hex64, strings.ToUpper(hex64), hex64[:63], hex64 + "0", hex64[:63] + "g", hex64 + "\n",
	"A", "_", "a1_B", "1A", "A-B", "A.B", "ÄB", "A\x00",
	"secrets/a.age", "secrets/.age", "secrets/..age", "secrets/a-b_c.d.age", "secrets/a/b.age",
	"secrets/a.age\n", "Secrets/a.age", "secrets/a.agex", "secrets/ä.age", "secrets/a.AGE",
	"a", "a.b-c_d", "-a", ".a", "_a", "A0", "a b", "a/b",
	"r@sha256:" + hex64, "docker.io/library/busybox:1@sha256:" + hex64, "R@sha256:" + hex64,
	"@sha256:" + hex64, "r@sha256:" + hex64[:63], "r@sha256:" + hex64 + "0", "r@@sha256:" + hex64,
	"a@b@sha256:" + hex64, "-r@sha256:" + hex64, "r_x.y/z:w-v@sha256:" + hex64, "r@sha512:" + hex64,
	"r@sha256:" + strings.ToUpper(hex64), "r@sha256:" + hex64 + "\n", "r\n@sha256:" + hex64,
}

// Every check accepts exactly what its regular expression matches.
func TestValidChecksMatchRegexps(t *testing.T) {
	for _, c := range checks {
		for _, s := range checkSeeds {
			if got, want := c.check(s), c.re.MatchString(s); got != want {
				t.Errorf("%s(%q) = %v, %s says %v", c.name, s, got, c.re, want)
			}
		}
	}
}

// FuzzValidChecksMatchRegexps: on arbitrary strings, every check agrees with
// its regular expression.
func FuzzValidChecksMatchRegexps(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range checks {
			if got, want := c.check(s), c.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, %s says %v", c.name, s, got, c.re, want)
			}
		}
	})
}

// Validate refuses what it refused before, with the same messages, on
// declarations with every kind of mistake at once.
func TestValidateSameErrors(t *testing.T) {
	good := large(8)
	bad := withStrings(good, "x", "../y", "0640")
	bad.Format = 2
	bad.Resources[0].File = &File{}
	bad.Resources[3].Container.Ports = append(bad.Resources[3].Container.Ports, Port{Host: 0, Container: 70000, Protocol: "sctp"})
	bad.Resources = append(bad.Resources, bad.Resources[1], Resource{ID: "k", Kind: "action"}, Resource{Kind: KindContainer, Container: &Container{}})
	cases := map[string]*Declaration{"good": good, "bad": bad, "empty": {}}
	for i, s := range checkSeeds {
		cases[fmt.Sprintf("seed %d", i)] = withStrings(good, s, s, s)
	}
	for name, d := range cases {
		got, want := fmt.Sprint(d.Validate()), fmt.Sprint(validateBefore(d))
		if got != want {
			t.Errorf("%s: Validate says\n%s\nbefore it said\n%s", name, got, want)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("the good declaration: %v", err)
	}
	if n := strings.Count(fmt.Sprint(bad.Validate()), "\n"); n < 10 {
		t.Fatalf("the bad declaration has %d errors", n+1)
	}
}
