package brooktest

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// EnvBin names the environment variable that points at a brook binary; it wins over PATH
// and the cache.
const EnvBin = "BROOK_BIN"

// CachedBin is where `go run github.com/brook-broker/brook/kits/go/brooktest/install`
// puts the binary: <user cache dir>/brook/<GOOS>-<GOARCH>/brook.
func CachedBin() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "brook", runtime.GOOS+"-"+runtime.GOARCH, "brook"), nil
}

// FindBin returns the brook binary a test would run: $BROOK_BIN, else `brook` on PATH, else
// the cached one. The error says where it looked and how to get one.
func FindBin() (string, error) {
	var path, from string
	if p := os.Getenv(EnvBin); p != "" {
		path, from = p, "$"+EnvBin
	} else if p, err := exec.LookPath("brook"); err == nil {
		path, from = p, "PATH"
	} else if p, err := CachedBin(); err == nil {
		if _, statErr := os.Stat(p); statErr == nil {
			path, from = p, "the brooktest cache"
		}
	}
	if path == "" {
		cached, _ := CachedBin()
		return "", errors.New("brooktest: no brook binary: set " + EnvBin + ", put brook on PATH, " +
			"or run `go run github.com/brook-broker/brook/kits/go/brooktest/install` once " +
			"(it builds or copies brook into " + cached + ")")
	}
	if err := checkArch(path); err != nil {
		return "", fmt.Errorf("brooktest: %s (from %s): %w", path, from, err)
	}
	return path, nil
}

// elfMachines maps GOARCH to the ELF machine a binary for it declares.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
}

// checkArch refuses a file that is not an executable for this machine, so a wrong download
// is one clear error instead of "exec format error" from deep inside a test.
func checkArch(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	if runtime.GOOS != "linux" {
		return nil // Only Linux builds exist today; other formats are left to exec.
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	if want, ok := elfMachines[runtime.GOARCH]; ok && f.Machine != want {
		return fmt.Errorf("built for %v, but this machine is %s", f.Machine, runtime.GOARCH)
	}
	return nil
}
