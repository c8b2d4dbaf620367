module example.com/portable

go 1.26.0
