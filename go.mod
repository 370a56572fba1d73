module github.com/squeeze-kv/squeeze

go 1.26
