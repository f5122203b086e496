module github.com/brook-broker/brook/kits/go/example

go 1.26.0

require (
	github.com/brook-broker/brook/kits/go/brooktest v0.0.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
)

// The kit from this checkout; a user outside it gets the module from its published path.
replace github.com/brook-broker/brook/kits/go/brooktest => ../brooktest
