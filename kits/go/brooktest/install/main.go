// Command install puts a brook binary where brooktest finds it (brooktest.CachedBin) when
// neither $BROOK_BIN nor PATH has one:
//
//	go run github.com/brook-broker/brook/kits/go/brooktest/install -from /path/to/brook
//	go run github.com/brook-broker/brook/kits/go/brooktest/install -source /path/to/brook/checkout
//
// -from copies a binary (a release download); -source builds one with
// `cargo build --release --bin brook` in a checkout of the Brook repository. Without either,
// it builds from the checkout this module sits in, when the module is used from one (a
// `replace` directive to a local path).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/brook-broker/brook/kits/go/brooktest"
)

func main() {
	from := flag.String("from", "", "copy this brook binary")
	source := flag.String("source", "", "build brook with cargo in this Brook checkout")
	flag.Parse()
	dst, err := brooktest.CachedBin()
	if err == nil {
		err = install(*from, *source, dst)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "brooktest install:", err)
		os.Exit(1)
	}
	fmt.Println("installed", dst)
}

func install(from, source, dst string) error {
	if from == "" {
		if source == "" {
			source = moduleCheckout()
		}
		if source == "" {
			return fmt.Errorf("give -from BINARY or -source CHECKOUT")
		}
		build := exec.Command("cargo", "build", "--release", "--bin", "brook")
		build.Dir, build.Stdout, build.Stderr = source, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("cargo build in %s: %w", source, err)
		}
		target := os.Getenv("CARGO_TARGET_DIR")
		if target == "" {
			target = filepath.Join(source, "target")
		}
		from = filepath.Join(target, "release", "brook")
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return copyFile(from, dst)
}

// moduleCheckout is the Brook checkout holding this source file, if it is one
// (kits/go/brooktest/install/main.go four levels under the root, next to Cargo.toml).
func moduleCheckout() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "tools", "Cargo.toml")); err != nil {
		return ""
	}
	return root
}

// copyFile writes through a temporary file and renames it, so a concurrent test never
// executes a half-written binary.
func copyFile(from, dst string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".brook-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
