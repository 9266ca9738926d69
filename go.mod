module github.com/capfs/capfs

go 1.26
