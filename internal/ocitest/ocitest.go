// Package ocitest builds a tiny, deterministic OCI image from the host's
// busybox-static binary and loads it into a test-private podman store, for
// tests that need a real container without a registry.
//
// [Build] writes the same archive bytes on every run, so the image's manifest
// digest is stable; [NewStore] gives a test its own podman store (root,
// runroot and tmpdir under /tmp, removed at cleanup); [Store.Load] loads the
// image and returns the digest-pinned reference
// "localhost/NAME@sha256:<manifest digest>", to be run with --pull=never
// (see /work/shared/notes/podman-here.md).
//
// The image holds /bin/busybox, symlinks for the applets tests use (sh,
// sleep, echo, cat, env, test, ls, ...) and a minimal /etc/passwd. Its default
// command is "sh".
package ocitest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Busybox is where the busybox-static binary is read from.
const Busybox = "/bin/busybox"

// Applets are the names linked to /bin/busybox in the image.
var Applets = []string{
	"cat", "chmod", "cp", "date", "echo", "env", "false", "grep", "head", "id",
	"kill", "ls", "mkdir", "mv", "printf", "ps", "rm", "sh", "sleep", "tail",
	"test", "touch", "true", "wc",
}

// epoch is the fixed time every entry and the config carry.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type entry struct {
	name string
	mode int64
	typ  byte
	link string
	body []byte
}

// Layer returns the image's single layer: an uncompressed tar with sorted
// names, a fixed mtime and numeric owner 0.
func Layer() ([]byte, error) { return layer("") }

// layer is [Layer] with /etc/variant holding variant when it is not empty, so
// a test can have two images with different digests.
func layer(variant string) ([]byte, error) {
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w (install busybox-static)", Busybox, err)
	}
	entries := []entry{
		{name: "bin/", mode: 0o755, typ: tar.TypeDir},
		{name: "bin/busybox", mode: 0o755, typ: tar.TypeReg, body: bb},
		{name: "etc/", mode: 0o755, typ: tar.TypeDir},
		{name: "etc/group", mode: 0o644, typ: tar.TypeReg, body: []byte("root:x:0:\nnobody:x:65534:\n")},
		{name: "etc/passwd", mode: 0o644, typ: tar.TypeReg, body: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{name: "root/", mode: 0o700, typ: tar.TypeDir},
		{name: "tmp/", mode: 0o1777, typ: tar.TypeDir},
	}
	if variant != "" {
		entries = append(entries, entry{name: "etc/variant", mode: 0o644, typ: tar.TypeReg, body: []byte(variant + "\n")})
	}
	for _, a := range Applets {
		entries = append(entries, entry{name: "bin/" + a, mode: 0o777, typ: tar.TypeSymlink, link: "busybox"})
	}
	return tarOf(entries)
}

func tarOf(entries []entry) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Typeflag: e.typ, Linkname: e.link,
			Size: int64(len(e.body)), ModTime: epoch, Format: tar.FormatPAX,
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.body); err != nil {
				return nil, fmt.Errorf("tar %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	return buf.Bytes(), nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// Archive returns the bytes of an OCI layout tar holding one image, tagged
// name (as "localhost/NAME:latest" once loaded), and the image's manifest
// digest ("sha256:<hex>"). The same name always gives the same bytes.
func Archive(name string) (archive []byte, digest string, err error) {
	return VariantArchive(name, "")
}

// VariantArchive is [Archive] for an image that also holds /etc/variant with
// variant in it: another variant is another digest.
func VariantArchive(name, variant string) (archive []byte, digest string, err error) {
	layer, err := layer(variant)
	if err != nil {
		return nil, "", err
	}
	config, err := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Cmd": []string{"sh"},
			"Env": []string{"PATH=/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{sum(layer)}},
	})
	if err != nil {
		return nil, "", fmt.Errorf("encode image config: %w", err)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: sum(config), Size: len(config)},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: sum(layer), Size: len(layer)}},
	})
	if err != nil {
		return nil, "", fmt.Errorf("encode image manifest: %w", err)
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{
			MediaType:   "application/vnd.oci.image.manifest.v1+json",
			Digest:      sum(manifest),
			Size:        len(manifest),
			Annotations: map[string]string{"org.opencontainers.image.ref.name": "localhost/" + name + ":latest"},
		}},
	})
	if err != nil {
		return nil, "", fmt.Errorf("encode image index: %w", err)
	}
	blob := func(b []byte) entry {
		return entry{name: "blobs/sha256/" + sum(b)[len("sha256:"):], mode: 0o644, typ: tar.TypeReg, body: b}
	}
	entries := []entry{
		{name: "blobs/", mode: 0o755, typ: tar.TypeDir},
		{name: "blobs/sha256/", mode: 0o755, typ: tar.TypeDir},
		blob(layer), blob(config), blob(manifest),
		{name: "index.json", mode: 0o644, typ: tar.TypeReg, body: index},
		{name: "oci-layout", mode: 0o644, typ: tar.TypeReg, body: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
	}
	archive, err = tarOf(entries)
	if err != nil {
		return nil, "", err
	}
	return archive, sum(manifest), nil
}

// Build writes the image archive for name into dir and returns its path and
// the image's manifest digest ("sha256:<hex>").
func Build(dir, name string) (archivePath, digest string, err error) {
	return BuildVariant(dir, name, "")
}

// BuildVariant is [Build] for [VariantArchive].
func BuildVariant(dir, name, variant string) (archivePath, digest string, err error) {
	archive, digest, err := VariantArchive(name, variant)
	if err != nil {
		return "", "", err
	}
	archivePath = filepath.Join(dir, name+".oci.tar")
	if err := os.WriteFile(archivePath, archive, 0o644); err != nil {
		return "", "", fmt.Errorf("write image archive: %w", err)
	}
	return archivePath, digest, nil
}
