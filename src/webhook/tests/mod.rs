mod deliver;
mod fixtures;
