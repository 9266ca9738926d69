package dir

func (d *Dir) Help() string { return "" }
func (f *File) Help() string { return "" }
func (c *Control) Help() string { return "" }
