package aferofs

import (
	"reflect"

	"github.com/spf13/afero"
	"github.com/spf13/afero/tarfs"
	"github.com/spf13/afero/zipfs"
)

var (
	osFsType = reflect.TypeOf((*afero.OsFs)(nil))
	fsIface  = reflect.TypeOf((*afero.Fs)(nil)).Elem()
)

// maxWrapDepth bounds how deep reachesOsFs looks through wrapper structs.
const maxWrapDepth = 8

// reachesOsFs reports whether fsys is an *afero.OsFs or wraps one in a field of type
// afero.Fs (afero.ReadOnlyFs, BasePathFs, CopyOnWriteFs, CacheOnReadFs, RegexpFs, and
// user wrappers built the same way). Unexported fields are inspected through
// reflection without reading their values as interfaces.
func reachesOsFs(fsys afero.Fs) bool {
	return reachesOs(reflect.ValueOf(fsys), 0)
}

func reachesOs(v reflect.Value, depth int) bool {
	if depth > maxWrapDepth || !v.IsValid() {
		return false
	}
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Type() == osFsType || v.Type() == osFsType.Elem() {
		return true
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Type() == fsIface || f.Type() == osFsType {
			if reachesOs(f, depth+1) {
				return true
			}
		}
	}
	return false
}

// sourceOf returns the filesystem an *afero.ReadOnlyFs reads from, as a reflect
// value (its field is unexported), or an invalid Value.
func sourceOf(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := v.Elem().FieldByName("source")
	if !f.IsValid() || f.Type() != fsIface {
		return reflect.Value{}
	}
	return f
}

// linkCaps reports what fsys can do with symlinks: read them (an Lstater and a
// LinkReader, or an archive whose entries carry symlink modes) and create them.
func linkCaps(fsys afero.Fs) (canRead, canCreate bool) {
	return linkCapsOf(reflect.ValueOf(fsys), 0)
}

var (
	readOnlyType = reflect.TypeOf((*afero.ReadOnlyFs)(nil))
	memMapType   = reflect.TypeOf((*afero.MemMapFs)(nil))
	zipType      = reflect.TypeOf((*zipfs.Fs)(nil))
	tarType      = reflect.TypeOf((*tarfs.Fs)(nil))
	lstaterType  = reflect.TypeOf((*afero.Lstater)(nil)).Elem()
	readerType   = reflect.TypeOf((*afero.LinkReader)(nil)).Elem()
	linkerType   = reflect.TypeOf((*afero.Linker)(nil)).Elem()
)

func linkCapsOf(v reflect.Value, depth int) (canRead, canCreate bool) {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() || depth > maxWrapDepth {
		return false, false
	}
	switch v.Type() {
	case memMapType:
		// MemMapFs has LstatIfPossible but stores no symlinks.
		return false, false
	case zipType, tarType:
		return true, false
	case readOnlyType:
		// ReadOnlyFs delegates reads to its source and refuses SymlinkIfPossible.
		r, _ := linkCapsOf(sourceOf(v), depth+1)
		return r, false
	}
	t := v.Type()
	return t.Implements(lstaterType) && t.Implements(readerType), t.Implements(linkerType)
}

// isArchive reports whether fsys is one of afero's read-only archive views.
func isArchive(fsys afero.Fs) bool {
	switch fsys.(type) {
	case *zipfs.Fs, *tarfs.Fs:
		return true
	}
	return false
}
