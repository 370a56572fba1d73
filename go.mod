module github.com/squeeze-kv/squeeze

go 1.26

require (
	github.com/andybalholm/brotli v1.3.0
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/ulikunitz/xz v0.5.17
)
