module github.com/hashicorp/golang-lru

go 1.12
