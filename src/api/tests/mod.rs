mod policy;
mod quantity;
mod text;
