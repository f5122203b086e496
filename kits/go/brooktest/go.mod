module github.com/brook-broker/brook/kits/go/brooktest

go 1.22
