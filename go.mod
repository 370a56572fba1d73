module github.com/squeeze-kv/squeeze

go 1.26.0

require github.com/klauspost/compress v1.20.4
