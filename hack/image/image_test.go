package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const (
	testVersion = "v9.9.9"
	testEpoch   = 1700000000
)

var (
	fakeOnce sync.Once
	fakeBins map[string]string // GOARCH -> fakeaisched built for linux/GOARCH
	fakeErr  error
	fakeDir  string
)

func TestMain(m *testing.M) {
	var err error
	if fakeDir, err = os.MkdirTemp("", "image-test-"); err != nil {
		log.Fatal(err)
	}
	code := m.Run()
	os.RemoveAll(fakeDir)
	os.Exit(code)
}

// hostArch returns the host's GOARCH and the other supported one, skipping
// the test on a host that is neither.
func hostArch(t *testing.T) (host, other string) {
	t.Helper()
	switch runtime.GOARCH {
	case "amd64":
		return "amd64", "arm64"
	case "arm64":
		return "arm64", "amd64"
	}
	t.Skipf("GOARCH %s is not amd64 or arm64", runtime.GOARCH)
	return "", ""
}

// fakeBinaries builds testdata/fakeaisched, linked with -X
// main.version=v9.9.9, for linux/amd64 and linux/arm64, once per test run.
func fakeBinaries(t *testing.T) map[string]string {
	t.Helper()
	hostArch(t)
	fakeOnce.Do(func() {
		bins := map[string]string{}
		for _, arch := range []string{"amd64", "arm64"} {
			out := filepath.Join(fakeDir, "linux_"+arch, "aisched")
			cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
				"-ldflags", "-X main.version="+testVersion, "-o", out, "./testdata/fakeaisched")
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				fakeErr = fmt.Errorf("building fakeaisched for %s: %v\n%s", arch, err, b)
				return
			}
			bins[arch] = out
		}
		fakeBins = bins
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeBins
}

// parse is parseFlags that fails the test on an error, with
// SOURCE_DATE_EPOCH unset.
func parse(t *testing.T, args ...string) config {
	t.Helper()
	cfg, err := parseFlags(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(%q): %v", args, err)
	}
	return cfg
}

// testConfig is the config of both fake binaries at testEpoch, with extra
// flags appended.
func testConfig(t *testing.T, extra ...string) config {
	t.Helper()
	bins := fakeBinaries(t)
	args := []string{
		"--binary", "linux/amd64=" + bins["amd64"],
		"--binary", "linux/arm64=" + bins["arm64"],
		"--version", testVersion,
		"--source-date-epoch", fmt.Sprint(testEpoch),
		"--out", filepath.Join(t.TempDir(), "oci"),
	}
	return parse(t, append(args, extra...)...)
}

func mustIndex(t *testing.T, cfg config) v1.ImageIndex {
	t.Helper()
	idx, err := buildIndex(cfg)
	if err != nil {
		t.Fatalf("buildIndex: %v", err)
	}
	return idx
}

func mustDigest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// tarEntry is what the tests compare of a layer's tar header.
type tarEntry struct {
	Name     string
	Type     byte
	Mode     int64
	Uid, Gid int
	ModTime  int64
}

// readLayer returns the headers and file contents of img's only layer.
func readLayer(t *testing.T, img v1.Image) ([]tarEntry, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	if mt, err := layers[0].MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("layer media type %q, %v; want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var hdrs []tarEntry
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.Unix()})
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	return hdrs, files
}

func TestBuildIndex(t *testing.T) {
	cfg := testConfig(t, "--revision", "0123456789abcdef")
	idx := mustIndex(t, cfg)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %q, want %q", im.MediaType, types.OCIImageIndex)
	}
	var plats []string
	for _, d := range im.Manifests {
		plats = append(plats, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(plats, want) {
		t.Fatalf("index platforms %q, want %q", plats, want)
	}

	dir := func(name string, mode int64, uid int) tarEntry {
		return tarEntry{name, tar.TypeDir, mode, uid, uid, testEpoch}
	}
	file := func(name string, mode int64) tarEntry {
		return tarEntry{name, tar.TypeReg, mode, 0, 0, testEpoch}
	}
	wantHdrs := []tarEntry{
		dir("etc/", 0o755, 0),
		file("etc/group", 0o644),
		file("etc/passwd", 0o644),
		dir("etc/ssl/", 0o755, 0),
		dir("etc/ssl/certs/", 0o755, 0),
		file("etc/ssl/certs/ca-certificates.crt", 0o644),
		dir("home/", 0o755, 0),
		dir("home/nonroot/", 0o755, 65532),
		dir("root/", 0o700, 0),
		dir("tmp/", 0o1777, 0),
		dir("usr/", 0o755, 0),
		dir("usr/local/", 0o755, 0),
		dir("usr/local/bin/", 0o755, 0),
		file("usr/local/bin/aisched", 0o755),
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.source":   "https://github.com/aisched/aisched",
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.title":    "aisched",
	}

	for _, desc := range im.Manifests {
		t.Run(desc.Platform.String(), func(t *testing.T) {
			if desc.MediaType != types.OCIManifestSchema1 {
				t.Errorf("manifest media type %q, want %q", desc.MediaType, types.OCIManifestSchema1)
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("config media type %q, want %q", m.Config.MediaType, types.OCIConfigJSON)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			c := cf.Config
			if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/aisched"}) ||
				c.WorkingDir != "/home/nonroot" || !slices.Equal(c.Env, []string{"PATH=/usr/local/bin:/usr/bin:/bin"}) || c.Cmd != nil {
				t.Errorf("config User %q Entrypoint %q WorkingDir %q Env %q Cmd %q", c.User, c.Entrypoint, c.WorkingDir, c.Env, c.Cmd)
			}
			if !maps.Equal(c.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", c.Labels, wantLabels)
			}
			if cf.OS != "linux" || cf.Architecture != desc.Platform.Architecture {
				t.Errorf("config platform %s/%s, want %s", cf.OS, cf.Architecture, desc.Platform)
			}
			if cf.Created.Unix() != testEpoch || len(cf.History) != 1 || cf.History[0].Created.Unix() != testEpoch {
				t.Errorf("created %v, history %+v: want every time %d", cf.Created, cf.History, testEpoch)
			}

			hdrs, files := readLayer(t, img)
			if !slices.Equal(hdrs, wantHdrs) {
				t.Errorf("layer entries:\n got %+v\nwant %+v", hdrs, wantHdrs)
			}
			if p := string(files["etc/passwd"]); !strings.Contains(p, "\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n") || !strings.HasPrefix(p, "root:x:0:0:") {
				t.Errorf("/etc/passwd:\n%s", p)
			}
			if g := string(files["etc/group"]); !strings.Contains(g, "nonroot:x:65532:") || !strings.HasPrefix(g, "root:x:0:") {
				t.Errorf("/etc/group:\n%s", g)
			}
			bin, err := os.ReadFile(fakeBinaries(t)[desc.Platform.Architecture])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(files["usr/local/bin/aisched"], bin) {
				t.Errorf("/usr/local/bin/aisched is not the %s --binary", desc.Platform.Architecture)
			}
			if n := countCerts(t, files["etc/ssl/certs/ca-certificates.crt"]); n <= 100 {
				t.Errorf("CA bundle has %d certificates, want > 100", n)
			}
		})
	}
}

// countCerts parses a PEM bundle that must hold nothing but certificates.
func countCerts(t *testing.T, data []byte) int {
	t.Helper()
	n := 0
	for len(bytes.TrimSpace(data)) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil || b.Type != "CERTIFICATE" {
			t.Fatalf("CA bundle: not a CERTIFICATE PEM block at %q", data[:min(len(data), 40)])
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("CA bundle: certificate %d: %v", n, err)
		}
		n++
	}
	return n
}

func TestReproducible(t *testing.T) {
	bins := fakeBinaries(t)
	first := mustDigest(t, mustIndex(t, testConfig(t)))
	if again := mustDigest(t, mustIndex(t, testConfig(t))); again != first {
		t.Errorf("two builds of the same input: index %s then %s", first, again)
	}
	// The order of --binary flags does not matter.
	swapped := parse(t, "--binary", "linux/arm64="+bins["arm64"], "--binary", "linux/amd64="+bins["amd64"],
		"--version", testVersion, "--source-date-epoch", fmt.Sprint(testEpoch), "--out", t.TempDir())
	if d := mustDigest(t, mustIndex(t, swapped)); d != first {
		t.Errorf("--binary flags swapped: index %s, want %s", d, first)
	}
	for _, args := range [][]string{
		{"--source-date-epoch", fmt.Sprint(testEpoch + 1)},
		{"--source-date-epoch", fmt.Sprint(maxEpoch)},
		{"--version", "v9.9.10"},
		{"--revision", "abc"},
	} {
		if d := mustDigest(t, mustIndex(t, testConfig(t, args...))); d == first {
			t.Errorf("%q: index digest unchanged: %s", args, d)
		}
	}
}

func TestSelfCheck(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs a linux binary")
	}
	host, _ := hostArch(t)
	idx := mustIndex(t, testConfig(t))
	rep, err := selfCheck(context.Background(), idx, testVersion)
	if err != nil {
		t.Fatalf("selfCheck: %v", err)
	}
	if rep.ran != "linux/"+host || rep.output != "fakeaisched v9.9.9 (test build)" {
		t.Errorf("self-check ran %q, which printed %q", rep.ran, rep.output)
	}
	var out strings.Builder
	rep.print(&out)
	for _, want := range []string{
		"index " + mustDigest(t, idx).String(),
		"image self-check: /usr/local/bin/aisched version printed fakeaisched v9.9.9 (test build)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	// The binary reports v9.9.9: any other --version, even a prefix of it,
	// fails.
	for _, wrong := range []string{"v9.9.8", "v9.9", "9.9.9"} {
		if _, err := selfCheck(context.Background(), idx, wrong); err == nil || !strings.Contains(err.Error(), "lacks the --version") {
			t.Errorf("selfCheck with --version %s: %v, want a version mismatch", wrong, err)
		}
	}
}

func TestSelfCheckRefusesRoot(t *testing.T) {
	for _, user := range []string{"", "0", "0:0", "0:65532", "root", "root:root"} {
		if err := checkUser(user); err == nil {
			t.Errorf("checkUser(%q) = nil, want an error", user)
		}
	}
	for _, user := range []string{"65532:65532", "65532", "nonroot"} {
		if err := checkUser(user); err != nil {
			t.Errorf("checkUser(%q): %v", user, err)
		}
	}

	// selfCheck applies it to every image, not only the host's.
	_, other := hostArch(t)
	idx := mustIndex(t, testConfig(t))
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	rooted := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if desc.Platform.Architecture == other {
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.Config.User = "0:0"
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
		}
		rooted = mutate.AppendManifests(rooted, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: desc.Platform}})
	}
	if _, err := selfCheck(context.Background(), rooted, testVersion); err == nil || !strings.Contains(err.Error(), "runs as root") {
		t.Errorf("selfCheck of a linux/%s image running as 0:0: %v, want a refusal", other, err)
	}
}

func TestBinaryRefused(t *testing.T) {
	bins := fakeBinaries(t)
	notELF := filepath.Join(t.TempDir(), "aisched.sh")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho v9.9.9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		binary string
		want   string
	}{
		{"linux/amd64=" + bins["arm64"], "for EM_AARCH64, not amd64"},
		{"linux/arm64=" + bins["amd64"], "for EM_X86_64, not arm64"},
		{"linux/amd64=" + notELF, "not an ELF executable"},
		{"linux/amd64=" + filepath.Join(t.TempDir(), "missing"), "no such file"},
		{"linux/amd64=" + t.TempDir(), "not a regular file"},
	}
	// A dynamically linked host binary, where there is one.
	if f, err := exec.LookPath("true"); err == nil && isDynamicELF(f) {
		cases = append(cases, struct{ binary, want string }{"linux/" + runtime.GOARCH + "=" + f, "dynamically linked"})
	}
	for _, c := range cases {
		cfg := parse(t, "--binary", c.binary, "--version", testVersion, "--out", t.TempDir())
		_, err := buildIndex(cfg)
		path := strings.SplitN(c.binary, "=", 2)[1]
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--binary "+c.binary) {
			t.Errorf("--binary %s: %v; want an error naming --binary, %s and %q", c.binary, err, path, c.want)
		}
	}
}

// isDynamicELF reports whether path is an ELF executable of the host's
// architecture with an ELF interpreter.
func isDynamicELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Machine == elfMachines[runtime.GOARCH] && slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
}

func TestParseFlags(t *testing.T) {
	bin := "linux/amd64=/bin/aisched"
	ok := []string{"--binary", bin, "--version", "v1.2.3", "--out", "o"}
	cases := []struct {
		name string
		args []string
		env  string // SOURCE_DATE_EPOCH
		want string // in the error
	}{
		{"no binary", []string{"--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary without path", []string{"--binary", "linux/amd64", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary without platform", []string{"--binary", "=/bin/x", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary without arch", []string{"--binary", "linux=/bin/x", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary empty path", []string{"--binary", "linux/amd64=", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary for windows", []string{"--binary", "windows/amd64=/x.exe", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary for riscv64", []string{"--binary", "linux/riscv64=/x", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"binary twice", []string{"--binary", bin, "--binary", "linux/amd64/v2=/y", "--version", "v1", "--out", "o"}, "", "--binary"},
		{"no version", []string{"--binary", bin, "--out", "o"}, "", "--version"},
		{"version with space", []string{"--binary", bin, "--version", "v1 2", "--out", "o"}, "", "--version"},
		{"version with colon", []string{"--binary", bin, "--version", "v1:2", "--out", "o"}, "", "--version"},
		{"negative epoch", append(slices.Clone(ok), "--source-date-epoch", "-1"), "", "--source-date-epoch"},
		{"epoch past 9999", append(slices.Clone(ok), "--source-date-epoch", "253402300800"), "", "--source-date-epoch"},
		{"epoch not a number", append(slices.Clone(ok), "--source-date-epoch", "1e9"), "", "--source-date-epoch"},
		{"bad env epoch", ok, "yesterday", "SOURCE_DATE_EPOCH"},
		{"bad repository", append(slices.Clone(ok), "--repository", "Ghcr.io/AISCHED"), "", "--repository"},
		{"repository with tag", append(slices.Clone(ok), "--repository", "ghcr.io/aisched/aisched:v1"), "", "--repository"},
		{"revision with space", append(slices.Clone(ok), "--revision", "abc def"), "", "--revision"},
		{"nothing to do", []string{"--binary", bin, "--version", "v1"}, "", "--out or --push"},
		{"unknown flag", append(slices.Clone(ok), "--tag", "x"), "", "-tag"},
		{"push not a bool", append(slices.Clone(ok), "--push=maybe"), "", "-push"},
		{"stray argument", append(slices.Clone(ok), "extra"), "", "unexpected argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseFlags(c.args, func(string) string { return c.env }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("parseFlags(%q): %v, want an error naming %s", c.args, err, c.want)
			}
		})
	}

	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SOURCE_DATE_EPOCH" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		args []string
		env  string
		want int64
	}{
		{ok, "", 0},
		{ok, "1700000000", 1700000000},
		{append(slices.Clone(ok), "--source-date-epoch", "42"), "1700000000", 42},
		{append(slices.Clone(ok), "--source-date-epoch", "253402300799"), "", maxEpoch},
	} {
		cfg, err := parseFlags(c.args, env(c.env), io.Discard)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", c.args, err)
		}
		if cfg.epoch.Unix() != c.want || cfg.repository != "ghcr.io/aisched/aisched" || cfg.version != "v1.2.3" || cfg.push {
			t.Errorf("parseFlags(%q) with SOURCE_DATE_EPOCH=%q: epoch %d repository %q version %q push %v",
				c.args, c.env, cfg.epoch.Unix(), cfg.repository, cfg.version, cfg.push)
		}
	}
}

// TestRun runs the command's whole path: build, check, write the layout and
// push to an in-process registry.
func TestRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs a linux binary")
	}
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of this machine
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/aisched/aisched"
	out := filepath.Join(t.TempDir(), "bin", "image")
	cfg := testConfig(t, "--out", out, "--push", "--repository", repo)
	want := mustDigest(t, mustIndex(t, cfg))

	for range 2 { // the second run replaces the first layout
		var stdout strings.Builder
		if err := run(context.Background(), cfg, &stdout); err != nil {
			t.Fatalf("run: %v\n%s", err, stdout.String())
		}
		for _, line := range []string{
			"index " + want.String(),
			"image self-check: /usr/local/bin/aisched version printed fakeaisched v9.9.9",
			"wrote OCI image layout " + out,
			"pushed " + repo + ":" + testVersion + "@" + want.String(),
		} {
			if !strings.Contains(stdout.String(), line) {
				t.Errorf("output lacks %q:\n%s", line, stdout.String())
			}
		}
	}

	raw, err := os.ReadFile(filepath.Join(out, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != want || top.Manifests[0].MediaType != types.OCIImageIndex ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Fatalf("index.json lists %+v, want the index %s annotated ref.name=%s", top.Manifests, want, testVersion)
	}
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	child, err := idx.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	if im, err := child.IndexManifest(); err != nil || len(im.Manifests) != 2 {
		t.Errorf("layout's index: %v manifests, %v; want 2", im, err)
	}
	if err := validate.Index(child); err != nil {
		t.Errorf("layout's index is inconsistent: %v", err)
	}
	// Three blobs per image (manifest, config, layer) and the index: no
	// leftovers of the first run.
	if blobs, err := os.ReadDir(filepath.Join(out, "blobs", "sha256")); err != nil || len(blobs) != 7 {
		t.Errorf("layout has %d blobs (%v), want 7", len(blobs), err)
	}

	// Readable by all, as a layout for other users and tools.
	if err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if want := map[bool]os.FileMode{true: fs.ModeDir | 0o755, false: 0o644}[d.IsDir()]; err == nil && fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	ref, err := name.NewTag(repo + ":" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d := mustDigest(t, pushed); d != want {
		t.Errorf("pushed index %s, want %s", d, want)
	}

	// An --out that is something else is never replaced.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.out, cfg.push = other, false
	if err := run(context.Background(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "not an OCI image layout") {
		t.Errorf("run with --out %s (not a layout): %v, want a refusal", other, err)
	}
	if _, err := os.Stat(filepath.Join(other, "notes.txt")); err != nil {
		t.Errorf("--out that is not a layout was touched: %v", err)
	}
}
