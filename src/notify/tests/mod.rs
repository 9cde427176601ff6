mod derive;
mod fixtures;
mod payload;
mod sign;
