module github.com/sluicehq/sluice/bench

go 1.26.0

require (
	github.com/sluicehq/sluice v0.0.0
	golang.org/x/sync v0.25.0
)

require github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect

replace github.com/sluicehq/sluice => ../
